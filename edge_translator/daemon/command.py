"""The daemon's subcommand, ``serve``: its flags become :class:`~.server.ServeOptions`.

The server and its extra (``serve``) are imported only when the command runs.
"""

from __future__ import annotations

import argparse
import logging


def add_parsers(sub) -> None:
    """Declare ``serve``.

    Args:
        sub: The ``edge-translator`` parser's subparsers action.
    """
    sv = sub.add_parser("serve", help="run the offline translation server (LibreTranslate and DeepL APIs; "
                        "extra 'serve')")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    sv.add_argument("--port", type=int, default=5000, help="TCP port (default 5000; 0 picks a free one)")
    sv.add_argument("--model", help="bundle directory or installed model name (default: $EDGE_TRANSLATOR_MODEL, then `models default`, then the embedded model)")
    sv.add_argument("--threads", type=int, help="ONNX Runtime threads of each worker (default: physical cores "
                    "shared among the workers)")
    sv.add_argument("--workers", type=int, default=1, help="decoding workers, each with its own copy of the model and --threads threads (default 1; see docs/engine.md)")
    sv.add_argument("--api-keys", metavar="FILE", help="file of API keys, one per line ('KEY [REQUESTS_PER_MINUTE]'); "
                    "when given, every request needs one")
    sv.add_argument("--char-limit", type=int, default=20_000, help="most characters per request (0: no limit; "
                    "default 20000)")
    sv.add_argument("--batch-limit", type=int, default=64, help="most texts per request (default 64)")
    sv.add_argument("--max-body", type=int, default=1 << 20, metavar="BYTES",
                    help="largest request body (default 1 MiB; larger gets 413)")
    sv.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                    help="most seconds a translation may take, and a keep-alive connection may stay idle "
                    "between requests (default 60)")
    sv.add_argument("--req-limit", type=int, default=0, metavar="N",
                    help="requests per minute per API key (or per client address without keys, the forwarded one "
                    "behind a --trusted-proxy); 0: no limit (default)")
    sv.add_argument("--http-threads", type=int, default=32, help="requests answered at once (default 32)")
    sv.add_argument("--connections", type=int, default=100, help="most open connections (default 100)")
    sv.add_argument("--connections-per-client", type=int, default=16, metavar="N",
                    help="most open connections from one address; more are answered 503 and closed at once, "
                    "so one client cannot take every --connections slot (default 16; 0: no cap; "
                    "--trusted-proxy addresses are exempt)")
    sv.add_argument("--header-timeout", type=float, default=10.0, metavar="SECONDS",
                    help="most seconds for a request's line and headers to arrive; a client sending them slower "
                    "is dropped (default 10; 0: only --timeout)")
    sv.add_argument("--body-min-rate", type=int, default=500, metavar="BYTES",
                    help="bytes a second a request's body must average after its first --header-timeout seconds; "
                    "a slower body is dropped (default 500; 0: only --timeout)")
    sv.add_argument("--trusted-proxy", action="append", default=[], metavar="ADDRESS[/BITS]",
                    help="a reverse proxy (address or network; repeatable) whose X-Forwarded-For names the "
                    "client for --req-limit; exempt from --connections-per-client (default: none, the header "
                    "is ignored)")
    sv.add_argument("--cache", type=int, default=4096, metavar="SENTENCES",
                    help="translations kept in memory for repeated sentences (default 4096; 0: off)")
    sv.add_argument("--tm", metavar="FILE", help="also reuse and fill this translation memory (SQLite; see "
                    "`edge-translator tm`)")
    sv.add_argument("--cors-origin", metavar="ORIGIN", help="let browser pages from ORIGIN ('*': any) call the API "
                    "(default: no CORS headers)")
    sv.add_argument("--exact-length", action="store_true",
                    help="benchmarks only: every sentence decodes exactly its length limit (2 x source tokens + "
                    "10), with no end of sentence and no repetition guard before it (a random model's peer "
                    "comparison, bench-serve --lt-length exact)")
    sv.add_argument("--lean-memory", action="store_true",
                    help="no ONNX Runtime arena at all (the default keeps memory steady with the decoder's "
                    "arena): less RSS, less throughput under many clients (for boards short of memory)")
    sv.add_argument("--drain-timeout", type=float, default=30.0, metavar="SECONDS",
                    help="after SIGTERM, most seconds to finish the requests in flight (default 30)")
    sv.add_argument("--state-dir", metavar="DIR",
                    help="where documents, their journals and glossaries are kept (default: $STATE_DIRECTORY, "
                    "else $XDG_STATE_HOME/edge-translator, else ~/.local/state/edge-translator); created when "
                    "first needed")
    sv.add_argument("--max-file-size", type=int, default=20_000_000, metavar="BYTES",
                    help="largest uploaded document (default 20000000; larger gets 413)")
    sv.add_argument("--files-dir", metavar="DIR", help="where uploaded and translated documents are kept (default: "
                    "files/ in the state folder)")
    sv.add_argument("--files-ttl", type=float, default=3600.0, metavar="SECONDS",
                    help="seconds a translated document is kept before it is deleted (default 3600)")
    sv.add_argument("--files-quota", type=int, default=1_000_000_000, metavar="BYTES",
                    help="most disk space all documents may take together (default 1000000000; over it: 507)")
    sv.add_argument("--max-queued-documents", type=int, default=8, metavar="N",
                    help="most documents waiting or being translated per API key (default 8; over it: 429)")
    sv.add_argument("--no-web", dest="web", action="store_false",
                    help="do not serve the web page at / (the APIs are unchanged)")
    sv.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the translation daemon (LibreTranslate, DeepL and our own API) until SIGTERM."""
    from .server import ServeOptions, serve

    options = ServeOptions(host=args.host, port=args.port, model=args.model, threads=args.threads,
                           workers=args.workers, exact_length=args.exact_length,
                           api_keys=args.api_keys, char_limit=args.char_limit, batch_limit=args.batch_limit,
                           max_body=args.max_body, timeout=args.timeout, req_limit=args.req_limit,
                           http_threads=args.http_threads, connections=args.connections, cache_size=args.cache,
                           connections_per_client=args.connections_per_client, header_timeout=args.header_timeout,
                           body_min_rate=args.body_min_rate, trusted_proxies=tuple(args.trusted_proxy),
                           cors_origin=args.cors_origin, drain_timeout=args.drain_timeout, memory=args.tm,
                           lean_memory=args.lean_memory, state_dir=args.state_dir,
                           web=args.web, max_file_size=args.max_file_size, files_dir=args.files_dir,
                           files_ttl=args.files_ttl, files_quota=args.files_quota,
                           max_queued_documents=args.max_queued_documents)
    if not args.verbose:
        logging.getLogger("edge_translator").setLevel(logging.INFO)
    return serve(options)
