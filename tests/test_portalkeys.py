"""The Wayland global shortcut through the XDG desktop portal (#51), on a private session bus
(dbus-daemon, started here) with a fake portal (jeepney, on a thread of its own) that owns
``org.freedesktop.portal.Desktop``, answers CreateSession and BindShortcuts with Response
signals on the request paths, and emits Activated when a test says so.

The fake sends its signals to no one in particular (no destination), so a client that did
not subscribe on the bus before its call never sees them. Tests wait on events with
timeouts, never for a fixed time.
"""

from __future__ import annotations

import queue
import shutil
import subprocess
import threading

import pytest

jeepney = pytest.importorskip("jeepney")
if shutil.which("dbus-daemon") is None:
    pytest.skip("dbus-daemon is not installed (tests/setup.sh installs it)", allow_module_level=True)

from jeepney import DBusAddress, HeaderFields, MessageType, new_error, new_method_return, new_signal  # noqa: E402
from jeepney.bus_messages import message_bus  # noqa: E402
from jeepney.io.threading import DBusRouter, Proxy, ReceiveStopped, open_dbus_connection  # noqa: E402

from edge_translator.gui.keyspec import ShortcutError, parse_keys  # noqa: E402
from edge_translator.gui.portalkeys import DESCRIPTION, INTERFACE, PORTAL, PORTAL_PATH, SHORTCUT_ID, \
    PortalShortcut, session_bus_address, xdg_trigger  # noqa: E402

WAIT = 10  # seconds any one event may take before the test fails
FALLBACK = ("global shortcut ctrl+alt+e: a Wayland desktop lets no program take a global shortcut unless it "
            "offers the GlobalShortcuts portal, and this one does not ({why}); bind `edge-translator gui "
            "--selection` (or `--clipboard`) to it in the desktop's keyboard settings (docs/desktop.md, "
            "'A global shortcut')")
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={folder}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


@pytest.fixture(scope="module")
def bus(tmp_path_factory):
    """The address of a session bus of the module's own, with no services to activate."""
    folder = tmp_path_factory.mktemp("bus")
    config = folder / "session.conf"
    config.write_text(BUS_CONFIG.format(folder=folder))
    log = folder / "daemon.log"  # its notes (an fd limit it may not raise) stay out of the output
    with log.open("w") as errors:
        daemon = subprocess.Popen(["dbus-daemon", f"--config-file={config}", "--print-address=1", "--nofork"],
                                  stdout=subprocess.PIPE, stderr=errors, text=True)
    try:
        address = daemon.stdout.readline().strip()
        assert address.startswith("unix:"), log.read_text()
        yield address
    finally:
        daemon.terminate()
        daemon.wait(WAIT)


class FakePortal:
    """``org.freedesktop.portal.Desktop`` on ``address``: GlobalShortcuts ``version`` (``None``:
    no such interface), and Response ``response`` to BindShortcuts (``None``: never answers).

    What it was asked is kept: ``bound`` (the session and shortcuts of each BindShortcuts),
    ``sessions`` (created), ``closed`` (Session.Close), ``requests`` (the handle of each request).
    """

    def __init__(self, address: str, version: int | None = 1, response: int | None = 0):
        self.version, self.response = version, response
        self.bound: list[tuple] = []
        self.sessions: list[str] = []
        self.requests: list[str] = []
        self.closed: queue.Queue = queue.Queue()
        self.connection = open_dbus_connection(address)
        router = DBusRouter(self.connection)  # only to own the name, then the loop reads the connection
        reply, = Proxy(message_bus, router, timeout=WAIT).RequestName(PORTAL, 4)  # DO_NOT_QUEUE
        router.close()
        assert reply == 1, reply  # primary owner
        self.thread = threading.Thread(target=self._serve, name="fake-portal", daemon=True)
        self.thread.start()

    def activate(self, session: str, shortcut_id: str = SHORTCUT_ID) -> None:
        self._signal(PORTAL_PATH, INTERFACE, "Activated", "osta{sv}", (session, shortcut_id, 1234, {}))

    def close(self) -> None:
        self.connection.interrupt()
        self.thread.join(WAIT)
        self.connection.close()

    def _signal(self, path: str, interface: str, member: str, signature: str, body: tuple) -> None:
        self.connection.send(new_signal(DBusAddress(path, interface=interface), member, signature, body))

    def _serve(self) -> None:
        try:
            while True:
                message = self.connection.receive()
                if message.header.message_type == MessageType.method_call:
                    self._answer(message)
        except ReceiveStopped:
            pass

    def _answer(self, call) -> None:
        fields = call.header.fields
        interface, member, path = fields.get(HeaderFields.interface), fields[HeaderFields.member], \
            fields[HeaderFields.path]
        sender = fields[HeaderFields.sender].lstrip(":").replace(".", "_")
        send = self.connection.send
        if (interface, member) == ("org.freedesktop.DBus.Properties", "Get"):
            if call.body == (INTERFACE, "version") and self.version is not None:
                send(new_method_return(call, "v", (("u", self.version),)))
            else:  # as xdg-desktop-portal answers for an interface it does not have
                send(new_error(call, "org.freedesktop.DBus.Error.InvalidArgs", "s",
                               (f"No such interface “{call.body[0]}”",)))
        elif (interface, member) == (INTERFACE, "CreateSession") and self.version is not None:
            options, = call.body
            handle = f"{PORTAL_PATH}/request/{sender}/{options['handle_token'][1]}"
            session = f"{PORTAL_PATH}/session/{sender}/{options['session_handle_token'][1]}"
            self.sessions.append(session)
            self.requests.append(handle)
            send(new_method_return(call, "o", (handle,)))
            self._signal(handle, "org.freedesktop.portal.Request", "Response", "ua{sv}",
                         (0, {"session_handle": ("s", session)}))
        elif (interface, member) == (INTERFACE, "BindShortcuts") and self.version is not None:
            session, shortcuts, parent, options = call.body
            handle = f"{PORTAL_PATH}/request/{sender}/{options['handle_token'][1]}"
            self.bound.append((session, shortcuts, parent))
            self.requests.append(handle)
            send(new_method_return(call, "o", (handle,)))
            if self.response is not None:
                granted = [(ident, {"description": properties["description"],
                                    "trigger_description": ("s", "Ctrl+Alt+E")}) for ident, properties in shortcuts]
                self._signal(handle, "org.freedesktop.portal.Request", "Response", "ua{sv}",
                             (self.response, {"shortcuts": ("a(sa{sv})", granted)} if self.response == 0 else {}))
        elif (interface, member) == ("org.freedesktop.portal.Session", "Close"):
            self.closed.put(path)
            send(new_method_return(call))
        elif (interface, member) == ("org.freedesktop.portal.Request", "Close"):
            send(new_method_return(call))
        else:
            send(new_error(call, "org.freedesktop.DBus.Error.UnknownMethod", "s", (f"no {interface}.{member}",)))


@pytest.fixture
def portal(bus):
    fake = FakePortal(bus)
    yield fake
    fake.close()


class Presses:
    """``on_press``: counts the calls, and a test waits for the count to reach a number."""

    def __init__(self):
        self.count = 0
        self.threads: set[str] = set()
        self._changed = threading.Condition()

    def __call__(self) -> None:
        with self._changed:
            self.count += 1
            self.threads.add(threading.current_thread().name)
            self._changed.notify_all()

    def reach(self, count: int) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self.count >= count, WAIT), f"{self.count} presses, not {count}"


def _portal_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("portal-shortcut")]


# -- the trigger and the bus's address --------------------------------------------------

@pytest.mark.parametrize("spec, trigger", [
    ("ctrl+alt+e", "CTRL+ALT+e"),
    ("<Super>F9", "LOGO+F9"),
    ("ctrl+shift+space", "CTRL+SHIFT+space"),
    ("Win+Alt+Return", "ALT+LOGO+Return"),
    ("ctrl+alt+pageup", "CTRL+ALT+Prior"),
    ("f24", "F24"),
])
def test_the_trigger_is_written_as_the_xdg_shortcuts_spec_does(spec, trigger):
    assert xdg_trigger(parse_keys(spec)) == trigger


def test_the_session_bus_is_the_variable_or_the_user_bus_socket(tmp_path):
    assert session_bus_address({"DBUS_SESSION_BUS_ADDRESS": "unix:path=/x", "XDG_RUNTIME_DIR": str(tmp_path)}) \
        == "unix:path=/x"
    assert session_bus_address({"XDG_RUNTIME_DIR": str(tmp_path)}) is None
    (tmp_path / "bus").touch()
    assert session_bus_address({"XDG_RUNTIME_DIR": str(tmp_path)}) == f"unix:path={tmp_path / 'bus'}"
    assert session_bus_address({}) is None


# -- the portal -------------------------------------------------------------------------

def test_start_binds_the_preferred_trigger_and_each_activation_is_one_press(portal, bus):
    shortcut = PortalShortcut(parse_keys("Control+Alt+E"), bus)
    presses = Presses()
    shortcut.start(presses)
    shortcut.start(presses)  # started already: nothing more
    (session, shortcuts, parent), = portal.bound
    assert portal.sessions == [session]
    assert shortcuts == [(SHORTCUT_ID, {"description": ("s", DESCRIPTION), "preferred_trigger": ("s", "CTRL+ALT+e")})]
    assert parent == "" and shortcut.trigger == "Ctrl+Alt+E"
    assert len(set(portal.requests)) == 2  # each request its own token
    portal.activate(session)
    presses.reach(1)
    portal.activate("/org/freedesktop/portal/desktop/session/1_99/other")  # another program's session
    portal.activate(session, "another")  # another shortcut
    portal.activate(session)
    presses.reach(2)  # the two before it, in order, would have made this 3 or 4
    portal.activate(session)
    presses.reach(3)
    shortcut.stop()  # joins the thread after whatever was queued before
    assert presses.count == 3
    assert presses.threads == {"portal-shortcut ctrl+alt+e"}
    assert portal.closed.get(timeout=WAIT) == session
    assert not _portal_threads()
    portal.activate(session)  # stopped: no one listens
    shortcut.stop()  # stopped already: nothing more
    assert portal.closed.empty() and presses.count == 3


def test_stop_closes_the_session_and_a_new_start_binds_again(portal, bus):
    shortcut = PortalShortcut(parse_keys("super+F9"), bus)
    presses = Presses()
    shortcut.start(presses)
    shortcut.stop()
    first = portal.sessions[0]
    assert portal.closed.get(timeout=WAIT) == first and not _portal_threads()
    shortcut.start(presses)
    second = portal.sessions[1]
    assert second != first and portal.bound[1][1][0][1]["preferred_trigger"] == ("s", "LOGO+F9")
    portal.activate(first)  # the closed session's
    portal.activate(second)
    presses.reach(1)
    shortcut.stop()
    assert presses.count == 1 and portal.closed.get(timeout=WAIT) == second


@pytest.mark.parametrize("response, why", [(1, "cancelled"), (2, "ended by the desktop")])
def test_a_dialog_the_person_does_not_grant_is_one_line(bus, response, why):
    portal = FakePortal(bus, response=response)
    try:
        shortcut = PortalShortcut(parse_keys("ctrl+alt+e"), bus)
        with pytest.raises(ShortcutError) as caught:
            shortcut.start(lambda: pytest.fail("activated"))
        assert str(caught.value) == (
            f"the desktop did not grant the global shortcut ctrl+alt+e ({why}); set it in Settings again to be "
            "asked again, or bind `edge-translator gui --selection` (or `--clipboard`) to it in the desktop's "
            "keyboard settings (docs/desktop.md, 'A global shortcut')")
        assert portal.closed.get(timeout=WAIT) == portal.sessions[0]  # the session is not left open
        assert not _portal_threads()
        shortcut.stop()  # not started: nothing to do
        assert portal.closed.empty()
    finally:
        portal.close()


def test_a_desktop_that_does_not_answer_is_one_line(bus):
    portal = FakePortal(bus, response=None)
    try:
        shortcut = PortalShortcut(parse_keys("ctrl+alt+e"), bus, answer_timeout=0.5)
        with pytest.raises(ShortcutError, match=r"^global shortcut ctrl\+alt\+e: the desktop did not answer "
                                                r"BindShortcuts within 0\.5 s; set it in Settings again, or bind"):
            shortcut.start(lambda: pytest.fail("activated"))
        assert portal.closed.get(timeout=WAIT) == portal.sessions[0] and not _portal_threads()
    finally:
        portal.close()


def test_no_portal_on_the_bus_is_the_wayland_line(bus):
    with pytest.raises(ShortcutError) as caught:
        PortalShortcut(parse_keys("ctrl+alt+e"), bus).start(lambda: None)
    assert str(caught.value) == FALLBACK.format(why="no desktop portal on the session bus")


def test_a_portal_without_global_shortcuts_is_the_wayland_line(bus):
    portal = FakePortal(bus, version=None)
    try:
        with pytest.raises(ShortcutError) as caught:
            PortalShortcut(parse_keys("ctrl+alt+e"), bus).start(lambda: None)
        assert str(caught.value) == FALLBACK.format(why=f"its portal has no {INTERFACE}")
        assert portal.sessions == [] and not _portal_threads()
    finally:
        portal.close()


def test_no_session_bus_is_the_wayland_line(tmp_path):
    with pytest.raises(ShortcutError) as caught:
        PortalShortcut(parse_keys("ctrl+alt+e"), None).start(lambda: None)
    assert str(caught.value) == FALLBACK.format(why="no session bus")
    with pytest.raises(ShortcutError) as caught:
        PortalShortcut(parse_keys("ctrl+alt+e"), f"unix:path={tmp_path / 'none'}").start(lambda: None)
    message = str(caught.value)
    assert message.startswith(FALLBACK.split(" ({why})")[0] + " (cannot reach the session bus: ")
    assert message.endswith(FALLBACK.split(" ({why})")[1]) and "\n" not in message


# -- through GlobalShortcut -------------------------------------------------------------

def test_global_shortcut_on_wayland_binds_through_the_portal(portal, bus, qapp, qtbot, monkeypatch):
    pytest.importorskip("pytestqt")
    from edge_translator.gui import globalkeys
    from edge_translator.gui.globalkeys import GlobalShortcut, backend_for

    keys = parse_keys("ctrl+alt+e")
    assert isinstance(backend_for(keys, "wayland", {"DBUS_SESSION_BUS_ADDRESS": bus}), PortalShortcut)
    assert isinstance(backend_for(keys, "xcb", {"WAYLAND_DISPLAY": "wayland-0", "DBUS_SESSION_BUS_ADDRESS": bus}),
                      PortalShortcut)  # XWayland under a Wayland session
    monkeypatch.setattr(globalkeys, "_platform", lambda: "wayland")
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus)
    shortcut = GlobalShortcut(keys)
    threads: list = []
    shortcut.activated.connect(lambda: threads.append(threading.current_thread()))
    shortcut.start()
    (session, _, _), = portal.bound
    with qtbot.waitSignal(shortcut.activated, timeout=WAIT * 1000):
        portal.activate(session)
    assert shortcut.active and threads == [threading.main_thread()]  # queued to the GUI thread
    shortcut.stop()
    assert not shortcut.active and portal.closed.get(timeout=WAIT) == session and not _portal_threads()


def test_global_shortcut_on_wayland_without_a_portal_refuses_as_before(qapp, monkeypatch, tmp_path):
    pytest.importorskip("pytestqt")
    from edge_translator.gui import globalkeys
    from edge_translator.gui.globalkeys import GlobalShortcut

    monkeypatch.setattr(globalkeys, "_platform", lambda: "wayland")
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no user bus socket in it
    shortcut = GlobalShortcut(parse_keys("ctrl+alt+e"))
    with pytest.raises(ShortcutError) as caught:
        shortcut.start()
    assert str(caught.value) == FALLBACK.format(why="no session bus")
    assert not shortcut.active
