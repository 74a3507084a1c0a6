"""Software text from gettext catalogs: reading .mo (both byte orders) and .po, every cleaning
rule and drop reason, deduplication, the package-level held-out split, and a whole harvest
of tiny .deb files built here (no network, no apt)."""

import gettext
import io
import json
import shutil
import struct
import subprocess
from collections import Counter

import pytest

from edge_translator.core.errors import ExportError, InputError
from edge_translator.toolchain import gettextdata, softwaredata
from edge_translator.toolchain.gettextdata import (
    CatalogEntry,
    choose_translations,
    clean_pair,
    clean_text,
    entry_pairs,
    placeholders,
    read_mo,
    read_po,
    strip_accelerators,
)
from edge_translator.toolchain.traindata import normalize_key

HEADER = "Content-Type: text/plain; charset=UTF-8\nPlural-Forms: nplurals=1; plural=0;\n"


def make_mo(messages: list[tuple[str, str]], order: str = "<", header: str = HEADER) -> bytes:
    """A .mo file: ``(original, translation)`` with gettext's ``\\x04`` and ``\\x00`` joins."""
    items = sorted([("", header)] + messages, key=lambda m: m[0].encode())
    originals = [o.encode() for o, _ in items]
    translations = [t.encode() for _, t in items]
    count = len(items)
    start = 28 + 16 * count
    blob, table_o, table_t = b"", b"", b""
    for strings, which in ((originals, "o"), (translations, "t")):
        for s in strings:
            entry = struct.pack(order + "2I", len(s), start + len(blob))
            blob += s + b"\x00"
            if which == "o":
                table_o += entry
            else:
                table_t += entry
    head = struct.pack(order + "7I", gettextdata.MO_MAGIC, 0, count, 28, 28 + 8 * count, 0, 0)
    return head + table_o + table_t + blob


MESSAGES = [
    ("Open", "打开"),
    ("menu\x04_File", "文件(_F)"),
    ("%d file\x00%d files", "%d 个文件"),
    ("Untranslated", ""),
]


@pytest.mark.parametrize("order", ["<", ">"])
def test_mo_reads_context_plural_and_header_in_both_byte_orders(order):
    entries = read_mo(make_mo(MESSAGES, order))
    by_id = {(e.context, e.msgid): e for e in entries}
    assert len(entries) == 5
    assert by_id[(None, "")].msgstr[0].startswith("Content-Type")
    assert by_id[(None, "Open")].msgstr == ("打开",)
    assert by_id[("menu", "_File")].msgstr == ("文件(_F)",)
    plural = by_id[(None, "%d file")]
    assert plural.msgid_plural == "%d files" and plural.msgstr == ("%d 个文件",)


def test_the_mo_writer_is_what_the_standard_library_reads():
    """The hand-made file is a real .mo: gettext itself reads the same messages."""
    catalog = gettext.GNUTranslations(io.BytesIO(make_mo(MESSAGES)))
    assert catalog.gettext("Open") == "打开"
    assert catalog.pgettext("menu", "_File") == "文件(_F)"
    assert catalog.ngettext("%d file", "%d files", 3) == "%d 个文件"


def test_mo_in_another_charset_and_bad_files():
    latin = make_mo([("Caf\u00e9", "咖啡")], header="Content-Type: text/plain; charset=UTF-8\n")
    assert read_mo(latin)[1].msgid == "Café"
    with pytest.raises(InputError, match="x.mo: not a gettext .mo file"):
        read_mo(b"\x00" * 40, "x.mo")
    with pytest.raises(InputError, match="truncated"):
        read_mo(make_mo(MESSAGES)[:60], "x.mo")
    gb = make_mo([("Open", "打开")], header="Content-Type: text/plain; charset=GB2312\n")
    with pytest.raises(InputError, match="does not decode as GB2312"):
        read_mo(gb)


PO = r'''
# Header
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"

#: src/main.c:10
msgctxt "menu"
msgid "_Quit"
msgstr "退出(_Q)"

#, fuzzy, c-format
msgid "Deleted %s"
msgstr "已删除 %s"

#, c-format
msgid "%d item"
msgid_plural "%d items"
msgstr[0] "%d 项"

msgid "A long "
"line with \"quotes\"\tand a tab"
msgstr "一行很长的"
"带“引号”的文字"

#~ msgid "Obsolete"
#~ msgstr "过时"
'''


def test_po_reads_context_fuzzy_plural_continuations_and_skips_obsolete():
    entries = read_po(PO)
    assert [e.msgid for e in entries] == ["", "_Quit", "Deleted %s", "%d item", 'A long line with "quotes"\tand a tab']
    assert entries[1].context == "menu" and not entries[1].fuzzy
    assert entries[2].fuzzy
    assert entries[3].msgid_plural == "%d items" and entries[3].msgstr == ("%d 项",)
    assert entries[4].msgstr == ("一行很长的带“引号”的文字",)
    with pytest.raises(InputError, match="x.po:2: not a .po line"):
        read_po('msgid ""\nbroken line\n', "x.po")


@pytest.mark.parametrize("en, zh, expected", [
    ("_File", "文件(_F)", ("File", "文件")),
    ("&File", "文件(&F)", ("File", "文件")),
    ("~File", "文件(~F)", ("File", "文件")),
    ("File(_F)", "文件（_F）", ("File", "文件")),
    ("Op_en", "打开(_O)", ("Open", "打开")),
    ("Fi&le", "&文件", ("File", "文件")),
    ("Save _As…", "另存为(_A)…", ("Save As…", "另存为…")),
    ("Tom && Jerry", "汤姆&&杰瑞", ("Tom & Jerry", "汤姆&杰瑞")),
    ("Use double__underscores", "使用双下划线 __", ("Use double_underscores", "使用双下划线 _")),
    ("LC_ALL overrides the locale", "LC_ALL 覆盖区域设置", ("LC_ALL overrides the locale", "LC_ALL 覆盖区域设置")),
    ("AT&T modem", "AT&T 调制解调器", ("AT&T modem", "AT&T 调制解调器")),
    ("_Python Console", "_Python 控制台", ("Python Console", "Python 控制台")),
])
def test_accelerators_of_every_style_are_removed(en, zh, expected):
    assert clean_pair(en, zh) == expected


def test_strip_accelerators_keeps_entities():
    assert strip_accelerators("Copy &amp; paste") == "Copy &amp; paste"


@pytest.mark.parametrize("en, zh, kept", [
    ("Cannot open %s", "无法打开 %s", True),
    ("Cannot open %s", "无法打开", False),
    ("%d of %d done", "已完成 %d/%d 个", True),
    ("%d of %s done", "已完成 %d/%d 个", False),
    ("Copy %s to %s", "将 %2$s 复制到 %1$s 之前", True),
    ("%1$s is %2$d years old", "%1$s 今年 %2$d 岁", True),
    ("Hello %(name)s", "你好 %(name)s", True),
    ("Hello %(name)s", "你好 %(user)s", False),
    ("Page {0} of {1}", "第 {0} 页，共 {1} 页", True),
    ("Page {0} of {1}", "第 {0} 页", False),
    ("Welcome, {name}", "欢迎，{name}", True),
    ("Welcome, {name}", "欢迎，{名字}", False),
    ("Argument $1 is missing", "缺少参数 $1", True),
    ("Argument $1 is missing", "缺少参数 $2", False),
    ("Saved %1 files", "已保存 %1 个文件", True),
    ("Saved %1 files in %2", "已保存 %1 个文件", False),
    ("Set ${HOME} first", "请先设置 ${HOME}", True),
    ("Set ${HOME} first", "请先设置主目录", False),
    ("Welcome to %PRODUCTNAME", "欢迎使用 %PRODUCTNAME", True),
    ("Welcome to %PRODUCTNAME", "欢迎使用 LibreOffice", False),
    ("100%% complete", "完成 100%%", True),
])
def test_placeholders_must_match_as_multisets_and_are_kept_verbatim(en, zh, kept):
    result = clean_pair(en, zh)
    if kept:
        assert result == (en, zh.replace(",", "，"))
    else:
        assert result == "placeholder_mismatch"


def test_placeholder_styles_are_recognised():
    assert placeholders("%s %5.2f %1$s %(n)d {0} {name} %1 $1 ${V} %PRODUCTNAME 100%% $(ARG1) %ld") == Counter(
        {"%s": 2, "%5.2f": 1, "%(n)d": 1, "{0}": 1, "{name}": 1, "%1": 1, "$1": 1, "${V}": 1,
         "%PRODUCTNAME": 1, "$(ARG1)": 1, "%ld": 1})
    assert placeholders("50% off, 100% sure") == Counter()


@pytest.mark.parametrize("en, zh, expected", [
    ("<b>Bold</b> text", "<b>粗体</b>文字", ("Bold text", "粗体文字")),
    ('See <a href="https://x.org/help">the manual</a>', '参见<a href="https://x.org/help">手册</a>',
     ("See the manual", "参见手册")),
    ("Line one<br/>line two", "第一行<br/>第二行", ("Line one line two", "第一行 第二行")),
    ("<span weight='bold'>%s</span> files", "<span weight='bold'>%s</span> 个文件", ("%s files", "%s 个文件")),
    ("Copy &amp; paste &lt;here&gt;", "复制 &amp; 粘贴 &lt;这里&gt;", ("Copy & paste <here>", "复制 & 粘贴 <这里>")),
    ("The <filename>%1</filename> file", "<filename>%1</filename> 文件", ("The %1 file", "%1 文件")),
    ("<b>Bold</b> text", "粗体文字", "markup_mismatch"),
    ("<i>Black</i>", "<b>黑</b>", "markup_mismatch"),
])
def test_markup_is_stripped_on_both_sides_or_the_pair_dropped(en, zh, expected):
    assert clean_pair(en, zh) == expected


@pytest.mark.parametrize("en, zh, reason", [
    ("First.\n\nSecond.\n\nThird.", "第一。\n\n第二。", "multi_paragraph"),
    ("word " * 70, "词" * 200, "too_long"),
    ("Ctrl+S", "Ctrl+S", "shortcut"),
    ("<Primary>q", "<Primary>q", "shortcut"),
    ("Shift-Left-Click", "Shift 键-左键单击", "shortcut"),
    ("<b>Bold</b>", "粗体", "markup_mismatch"),
    ("...", "……", "no_letters"),
    ("12/12/2000", "2000-12-12", "no_letters"),
    ("%s: %s", "%s：%s", "lone_format"),
    ("%d × %d", "%d×%d", "lone_format"),
    ("%Y-%m-%d", "%Y年%m月%d日", "date_format"),
    ("%a, %b %e", "%b%e日 %a", "date_format"),
    ("Yesterday %l:%M %p", "昨天 %p %l:%M", "date_format"),
    ("Cannot open %s", "无法打开文件", "placeholder_mismatch"),
    ("Use --force to overwrite", "使用 --force 覆盖", "path_or_command"),
    ("  -v, --verbose   explain what is being done", "  -v, --verbose   详细显示", "path_or_command"),
    ("Edit /etc/fstab/ by hand", "手动编辑 /etc/fstab/", "path_or_command"),
    ("See https://example.org", "参见 https://example.org", "path_or_command"),
    ("Usage: foo [OPTION]", "用法：foo [选项]", "path_or_command"),
    ("GtkWidget::visible", "可见", "code"),
    ("org.gnome.Nautilus", "文件", "code"),
    ("@g descriptor is bad", "@g 描述符无效", "code"),
    ("Mosaic", "mosaic", "no_han"),
    ("Linux/PA-RISC boot", "Linux/PA-RISC 启动", "mostly_latin"),
    ("No", "不，不要保存这个文件并且立即退出程序", "length_ratio"),
    ("Disconnect from the current wireless network", "断开", "length_ratio"),
])
def test_every_drop_reason(en, zh, reason):
    assert reason in gettextdata.DROP_REASONS
    assert clean_text(en, zh) == reason


def test_whitespace_ellipsis_and_chinese_punctuation_are_normalised():
    assert clean_pair("  Open\n  the   file...  ", "打开\n文件...") == ("Open the file…", "打开文件…")
    assert clean_pair("Loading…", "正在加载……") == ("Loading…", "正在加载…")
    assert clean_pair("Are you sure?", "你确定吗?") == ("Are you sure?", "你确定吗？")
    assert clean_pair("Name:", "名称:") == ("Name:", "名称：")
    assert clean_pair("Version 2.0: new", "版本 2.0: 新") == ("Version 2.0: new", "版本 2.0: 新")


def test_paragraphs_pair_up_when_both_sides_have_as_many():
    assert clean_text("The file exists.\n\nReplace it?", "文件已存在。\n\n要替换吗?") == [
        ("The file exists.", "文件已存在。"), ("Replace it?", "要替换吗？")]


def entries(*items):
    return [CatalogEntry(*item) if len(item) == 5 else CatalogEntry(item[0], item[1], item[2], item[3])
            for item in items]


def test_entry_pairs_drops_header_fuzzy_untranslated_and_credits_and_chooses_plural_forms():
    drops = Counter()
    found = list(entry_pairs(entries(
        (None, "", None, ("Content-Type: text/plain\n",)),
        (None, "Deleted %s", None, ("已删除 %s",), True),
        (None, "Empty", None, ("",)),
        (None, "Same", None, ("Same",)),
        (None, "translator-credits", None, ("张三",)),
        ("NAME OF TRANSLATORS", "Your names", None, ("张三",)),
        ("menu", "_Open", None, ("打开(_O)",)),
        (None, "One file", "%d files", ("%d 个文件",)),          # one Chinese form: the plural English
        (None, "%d file", "%d files", ("%d 个文件", "%d 个文件")),  # two forms: the singular
        (None, "manual|Verify the Data", None, ("校验数据",)),
    ), drops))
    assert found == [("menu", "Open", "打开"), (None, "%d files", "%d 个文件"), (None, "%d file", "%d 个文件"),
                     (None, "Verify the Data", "校验数据")]
    assert drops == Counter({"header": 1, "fuzzy": 1, "untranslated": 2, "credits": 2})


def test_entry_pairs_tries_the_other_english_form():
    drops = Counter()
    found = list(entry_pairs(entries((None, "%d file", "Many files", ("%d 个文件",))), drops))
    assert found == [(None, "%d file", "%d 个文件")] and not drops


def test_choose_translations_dedupes_and_keeps_the_most_frequent():
    rows = [("a", "打开", "打開", "Open"), ("b", "打开", "", "Open"), ("c", "开启", "開啟", "Open"),
            ("a", "打开", "打開", "Open"), ("a", "保存", "", "Save"), ("b", "存储", "", "Save"),
            ("c", "关闭", "", "Close")]
    kept, dropped = choose_translations(rows)
    assert kept == [("a", "打开", "打開", "Open"), ("a", "保存", "", "Save"), ("c", "关闭", "", "Close")]
    assert dropped == Counter({"duplicate": 2, "alternative_translation": 2})
    # the tie is decided by the number of origins, then Unicode order, whatever the row order
    assert choose_translations(list(reversed(rows)))[0][1][1] == "保存"


# -- the harvest ----------------------------------------------------------------------------

DEP5 = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: demo

Files: *
Copyright: 2020 Someone
License: GPL-2+
 This program is free software.

Files: po/*
Copyright: 2020 Translators
License: LGPL-2.1+

Files: doc/*
License: GFDL-1.3
"""


def test_licences_from_machine_readable_and_free_form_copyright():
    assert softwaredata.licences(DEP5) == {"licence": "GPL-2+", "translations": "LGPL-2.1+"}
    assert softwaredata.licences(DEP5.replace("po/*", "src/*")) == {"licence": "GPL-2+", "translations": "GPL-2+"}
    free = "This package was debianized.\n\nOn Debian systems, see /usr/share/common-licenses/LGPL-2.1.\n"
    assert softwaredata.licences(free)["licence"] == "LGPL-2.1"
    assert softwaredata.licences("Released under the GNU General Public License.")["licence"] == "GPL"


def tree(tmp_path, name, source, catalogs, copyright_text=DEP5, section="gnome"):
    root = tmp_path / name
    files = []
    for path, messages in catalogs.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(make_mo(messages))
        files.append(path)
    doc = root / "usr/share/doc" / name / "copyright"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(copyright_text)
    return softwaredata.PackageTree(name, "1.0-1", source, section, root, files + [f"/usr/share/doc/{name}/copyright"])


def cn(domain):
    return f"/usr/share/locale/zh_CN/LC_MESSAGES/{domain}.mo"


def tw(domain):
    return f"/usr/share/locale/zh_TW/LC_MESSAGES/{domain}.mo"


def identity(text):
    return text


def test_harvest_package_joins_simplified_and_traditional_catalogs(tmp_path):
    data = tree(tmp_path, "app-data", "app", {
        cn("app"): [("_Open", "打开(_O)"), ("Save", "保存"), ("Cannot open %s", "无法打开")],
        tw("app"): [("_Open", "開啟(_O)"), ("Folder", "資料夾")],
        "/usr/lib/libreoffice/program/resource/zh-TW/LC_MESSAGES/extra.mo": [("Quit", "結束")],
    })
    result = softwaredata.harvest_package([data], t2s=identity, tw2sp=lambda s: s.replace("資料夾", "文件夹"))
    assert result.name == "app"
    assert sorted(result.rows) == sorted([("app", "打开", "開啟", "Open"), ("app", "保存", "", "Save"),
                                          ("app", "文件夹", "資料夾", "Folder"), ("app", "結束", "結束", "Quit")])
    report = result.report
    assert report["raw_entries"] == {"zh_CN": 4, "zh_TW": 5}
    assert report["drops"]["zh_CN"] == {"header": 1, "placeholder_mismatch": 1}
    assert report["licence"] == "GPL-2+" and report["translations"] == "LGPL-2.1+"
    assert report["binaries"][0]["version"] == "1.0-1" and len(report["catalogs"]) == 3


def test_split_holds_whole_packages_out_with_no_shared_text(tmp_path):
    def harvest(name, rows):
        return softwaredata.PackageHarvest(name, [(name, *row) for row in rows], {})

    harvests = [
        harvest("big", [("取消", "", "Cancel"), ("打开文件", "", "Open a file"), ("关于", "", "About"),
                        ("电脑", "", "Computer"), ("新建", "", "New!")]),
        harvest("tool", [("取消", "", "Cancel"), ("用户", "", "User")]),
        harvest("gui", [("电脑", "", "My Computer"), ("新建", "", "New"), ("帮助", "", "Help")]),
    ]
    to_hant = {"电脑": "電腦"}.get
    splits, stats = softwaredata.split_packages(harvests, {"test": ("tool",), "dev": ("gui",)},
                                                lambda s: to_hant(s, s))
    assert [r[3] for r in splits["train"]] == ["Open a file", "About"]
    assert [r[3] for r in splits["test"]] == ["Cancel", "User"]
    assert [r[3] for r in splits["dev"]] == ["My Computer", "New", "Help"]
    held = {normalize_key(t) for rows in (splits["test"], splits["dev"]) for r in rows for t in (r[1], r[3])}
    assert not held & {normalize_key(t) for r in splits["train"] for t in (r[1], r[3])}
    assert stats["removed_overlap"] == {"train": 3, "dev": 0}
    with pytest.raises(ValueError, match="not harvested: nope"):
        softwaredata.split_packages(harvests, {"test": ("nope",)}, identity)
    with pytest.raises(ValueError, match="both test and dev: gui"):
        softwaredata.split_packages(harvests, {"test": ("gui",), "dev": ("gui",)}, identity)


def build_deb(tmp_path, folder, name, source, catalogs, section="gnome"):
    root = tmp_path / "build" / name
    for path, messages in catalogs.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(make_mo(messages))
    doc = root / "usr/share/doc" / name
    doc.mkdir(parents=True, exist_ok=True)
    (doc / "copyright").write_text(DEP5)
    (root / "DEBIAN").mkdir(parents=True, exist_ok=True)
    (root / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: 2.0-1\nSource: {source}\nSection: {section}\nArchitecture: all\n"
        f"Maintainer: Test <test@example.org>\nDescription: test package\n")
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(root), str(folder / f"{name}_2.0-1_all.deb")],
                   check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs Debian's dpkg-deb")
def test_harvest_writes_the_tables_the_training_terms_and_the_sources_json(tmp_path):
    pytest.importorskip("opencc")
    debs = tmp_path / "debs"
    build_deb(tmp_path, debs, "editor-common", "editor", {
        cn("editor"): [("_Save", "保存(_S)"), ("Open a file", "打开文件"), ("Cancel", "取消"), ("Ctrl+S", "Ctrl+S 键")],
        tw("editor"): [("_Save", "儲存(_S)"), ("Open a file", "開啟檔案"), ("Cancel", "取消")]})
    build_deb(tmp_path, debs, "viewer", "viewer", {cn("viewer"): [("Zoom in", "放大"), ("Cancel", "取消")]})
    build_deb(tmp_path, debs, "shell", "shell", {cn("shell"): [("Quit", "退出"), ("Save", "保存")]})
    out = tmp_path / "out"
    files = softwaredata.harvest(out, debs=debs, names=["editor-common", "viewer", "shell"],
                                 heldout={"test": ("viewer",), "dev": ("shell",)})

    def rows(split):
        return [line.split("\t") for line in files[split].read_text(encoding="utf-8").splitlines()]

    assert rows("train") == [["editor", "打开文件", "開啟檔案", "Open a file"]]  # Save, Cancel are held out
    assert rows("test") == [["viewer", "取消", "", "Cancel"], ["viewer", "放大", "", "Zoom in"]]  # .mo order
    assert rows("dev") == [["shell", "退出", "", "Quit"], ["shell", "保存", "", "Save"]]
    sources = json.loads(files["sources"].read_text(encoding="utf-8"))
    editor = next(p for p in sources["packages"] if p["name"] == "editor")
    assert editor["version"] == "2.0-1" and editor["licence"] == "GPL-2+" and editor["split"] == "train"
    assert editor["raw_entries"] == {"zh_CN": 5, "zh_TW": 4} and editor["drops"]["zh_CN"]["shortcut"] == 1
    assert editor["catalogs"] == [f"editor-common:{cn('editor')}", f"editor-common:{tw('editor')}"]
    assert sources["totals"]["train"] == 1 and sources["totals"]["removed_overlap"]["train"] == 2
    assert sources["heldout"] == {"test": ["viewer"], "dev": ["shell"]}
    # the short strings of the training packages, before the overlap filter: Save and Cancel,
    # which held-out packages also have, from the training package only, never from viewer or shell
    assert sorted(rows("terms")) == [["editor", "保存", "儲存", "Save"], ["editor", "取消", "取消", "Cancel"],
                                     ["editor", "打开文件", "開啟檔案", "Open a file"]]
    assert sources["totals"]["terms"] == 3

    build_deb(tmp_path, tmp_path / "bad", "nonfree-data", "nonfree", {cn("x"): [("Quit", "退出")]},
              section="non-free/games")
    with pytest.raises(ExportError, match="nonfree-data is in Debian's non-free, not main"):
        softwaredata.harvest(tmp_path / "out2", debs=tmp_path / "bad", names=["nonfree-data"], heldout={})


PAGE = """<page xmlns="http://projectmallard.org/1.0/" id="save">
  <info>
    <credit type="author"><name>{author}</name></credit>
    <desc>{desc}</desc>
    <title type="sort">zzz</title>
  </info>
  <title>{title}</title>
  <p>{p1}</p>
  <steps><item><p>{p2}</p></item></steps>
  <code>make install</code>
</page>"""
EN_PAGE = dict(author="Jane Doe", desc="Keep your changes.", title="Save a file",
               p1="Click the <gui>Save</gui> button\n   to keep your changes.", p2="Press <key>Ctrl</key>.")
ZH_PAGE = dict(author="张三", desc="保留您的更改。", title="保存文件",
               p1="单击<gui>保存</gui>按钮以保留您的更改。", p2="按 <key>Ctrl</key>。")


def test_help_pages_pair_block_by_block():
    from edge_translator.toolchain import helppages

    en, zh = PAGE.format(**EN_PAGE).encode(), PAGE.format(**ZH_PAGE).encode()
    assert helppages.page_pairs(en, zh) == [
        ("Keep your changes.", "保留您的更改。"), ("Save a file", "保存文件"),
        ("Click the Save button to keep your changes.", "单击保存按钮以保留您的更改。"), ("Press Ctrl.", "按 Ctrl。")]
    shorter = PAGE.replace("<steps><item><p>{p2}</p></item></steps>", "").format(**ZH_PAGE).encode()
    assert helppages.page_pairs(en, shorter) is None
    assert helppages.page_pairs(en, b"<page><p>broken") is None


def test_harvest_package_reads_help_pages_with_their_english_original(tmp_path):
    data = tree(tmp_path, "app-help", "app", {cn("app"): [("Open", "打开")]})
    for folder, values in (("C", EN_PAGE), ("zh_CN", ZH_PAGE), ("zh_TW", ZH_PAGE)):
        path = f"/usr/share/help/{folder}/app/save.page"
        target = data.path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(PAGE.format(**values), encoding="utf-8")
        if folder != "zh_TW":  # a translation without its original is not read
            data.files.append(path)
    result = softwaredata.harvest_package([data], t2s=identity, tw2sp=identity)
    assert ("app", "单击保存按钮以保留您的更改。", "", "Click the Save button to keep your changes.") in result.rows
    assert len(result.rows) == 5 and result.report["help"] == {"pages": 1, "mismatched_pages": 0, "blocks": 4}
