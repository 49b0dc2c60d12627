"""ISO 639-1 two-letter codes → the ISO 639-3 folder names of multilingual-gsm-symbolic.

Only unambiguous mappings. Where 639-1 names a macrolanguage and the package holds
exactly one of its varieties, the code maps to it (``fa`` → ``pes``, ``sw`` → ``swh``,
``ms`` → ``zlm``, ``uz`` → ``uzn``, ``ne`` → ``npi``, ``or`` → ``ory``, ``ps`` → ``pbu``,
``om`` → ``gaz``, ``ku`` → ``kmr``). Deliberately left out: ``az`` (the package has South
Azerbaijani, ``azb``, while ``az`` usually means North Azerbaijani), ``ff`` (``fuv`` is one
Fula variety) and ``no`` (``nob`` or ``nno``); use the three-letter folder name for those
and for languages with no two-letter code (``arz``, ``yue``, ``bho``, ``eng_metric``...).
"""

from __future__ import annotations

_PAIRS_TEXT = """
af afr am amh ar ara as asm be bel bg bul bm bam bn ben bs bos ca cat cs ces da dan de deu
el ell en eng es spa et est fa pes fi fin fo fao fr fra ga gle gu guj ha hau hi hin hr hrv
ht hat hu hun id ind ig ibo is isl it ita ja jpn jv jav kk kaz km khm kn kan ko kor ku kmr
lg lug ln lin lt lit lv lav ml mal mr mar ms zlm mt mlt my mya nb nob ne npi nl nld nn nno
ny nya om gaz or ory pa pan pl pol ps pbu pt por rn run ro ron ru rus rw kin sd snd si sin
sk slk sl slv sn sna so som su sun sv swe sw swh ta tam te tel th tha tl tgl tn tsn tr tur
ug uig uk ukr ur urd uz uzn vi vie wo wol xh xho yo yor zh zho zu zul
"""
_PAIRS = _PAIRS_TEXT.split()
ISO1_TO_FOLDER: dict[str, str] = dict(zip(_PAIRS[::2], _PAIRS[1::2], strict=True))
