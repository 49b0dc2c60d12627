"""Blinded human annotation: export a packet, label it in a browser, import the labels.

``packet`` samples a run into a folder that holds only contexts and user turns (the key
back to records is kept outside it), ``app`` serves that folder to annotators, ``db``
stores their labels as they submit, and ``importer`` writes label files in the
``userturn agree`` format. The web app needs the ``annotate`` extra (FastAPI, uvicorn).
"""

from userturn.annotate.importer import ImportResult, import_annotations
from userturn.annotate.packet import ExportOptions, ExportResult, export_packet, load_packet

__all__ = [
    "ExportOptions",
    "ExportResult",
    "ImportResult",
    "export_packet",
    "import_annotations",
    "load_packet",
]
