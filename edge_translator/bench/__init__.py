"""The measurement harness: this runtime against its peers, under load, as a daemon, on documents.

Each benchmark is a module of its own (:mod:`.bench`, :mod:`.loadbench`, :mod:`.servebench`,
:mod:`.docsbench`, :mod:`.placeholders`) and none imports another: what they share is in
:mod:`.machine` (where it ran, sizes), :mod:`.prose` (the input text) and :mod:`.report`
(``docs/benchmarks.md`` and ``.json``). :mod:`.command` declares the ``bench*``
subcommands. The harness builds its models with the toolchain and needs the ``bench``
extra; the single-file apps leave it out.
"""
