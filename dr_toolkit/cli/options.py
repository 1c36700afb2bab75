"""The global options of `drt` (``--json``, ``--config/-c PATH``, ``-v``), as data.

Below both :mod:`dr_toolkit.cli.main` (which hoists them in front of the command and answers
`drt --help`) and :mod:`dr_toolkit.cli.app` (which lists them in every command's help): one
table, no import between the two. Imports nothing.
"""

from __future__ import annotations

GLOBAL_FLAGS = ("--json", "--verbose", "-v", "-vv", "-vvv")
GLOBAL_VALUED = ("--config", "-c")
HELP_FLAGS = ("-h", "--help")

GLOBAL_OPTIONS = (
    ("-c, --config PATH", "Topology file [env DRT_CONFIG; default: ./drt.yaml]."),
    ("--json", "Machine output (JSON) on stdout; logs go to stderr."),
    ("-v, --verbose", "More logging (-vv: debug, and the traceback of an internal error)."),
    ("-h, --help", "Show this message and exit."),
)
