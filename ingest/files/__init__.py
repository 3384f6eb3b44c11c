"""The local log-files connector: detect a file's format, parse it column-wise, land it.

Sources (the ``source`` partition of ``observations`` and the ``--source`` values):
``syslog``, ``journald``, ``kmsg``, ``app``, ``kubectl``. :func:`read_log_file` parses one
file without touching the lake; :func:`land_log_files` expands paths, ties files to job
attempts and lands observations and rejects through :class:`ingest.lake.Lake`.
"""

from ingest.files.common import FilesError
from ingest.files.detect import PARSERS, detect_source
from ingest.files.land import FileReport, FilesReport, land_log_files
from ingest.files.read import ParsedFile, read_log_file

SOURCES = tuple(sorted(PARSERS))
"""Valid ``source`` names."""

__all__ = [
    "SOURCES", "FileReport", "FilesError", "FilesReport", "ParsedFile", "detect_source",
    "land_log_files", "read_log_file",
]
