"""XA transactions in the entry stream: which entries belong to one, as canal marks them (header props).

canal marks the entries of an XA transaction with two header props: ``XA_TYPE`` (``XA_START`` on its
TRANSACTIONBEGIN, ``XA_END`` on its TRANSACTIONEND, ``XA_COMMIT`` / ``XA_ROLLBACK`` on the XACOMMIT / XAROLLBACK
entry of its second phase) and ``XA_XID``, the xid as the binlog spells it (MariaDB: ``X'7831',X'',1``). pycanal
also puts ``XA_XID`` on each row and statement entry of the transaction, so a consumer that sees a batch starting
mid-transaction still knows the rows were prepared, not committed: they become visible at the XACOMMIT entry of that
xid and never at its XAROLLBACK.

An XA COMMIT whose PREPARE lies before the stream's start comes with the PREPARE's rows read back
(:mod:`canal.parse.xa_lookback`, prop ``XA_RECOVERED``).

MariaDB logs ``XA START`` inside the transaction's GTID event (flag ``FL_PREPARED_XA``, the xid after the
commit id), not as a query; MySQL logs an ``XA START`` query.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping
from typing import Final

XA_TYPE: Final = "XA_TYPE"
XA_XID: Final = "XA_XID"
XA_PREPARE_TYPE: Final = "XAPREPARE"
"""The ``type`` of the change row made of an XA transaction's TRANSACTIONEND (its ``XA END``, before ``XA PREPARE``:
:mod:`canal.lake.forms.changes`), which the mirror reads (:mod:`canal.lake.apply.xa`)."""

_FL_GROUP_COMMIT_ID: Final = 0x02
_FL_PREPARED_XA: Final = 0x40
_FL_COMPLETED_XA: Final = 0x80


def xa_props(xa_type: str | None, xid: str | None) -> Mapping[str, str]:
    """The header props of an entry of the XA transaction ``xid`` (empty outside XA transactions)."""
    if xid is None:
        return {}
    return {XA_XID: xid} if xa_type is None else {XA_TYPE: xa_type, XA_XID: xid}


def mariadb_gtid_xid(body: bytes, start: int, end: int, flags: int) -> str | None:
    """The xid a MariaDB GTID event body (from ``start``: seq, domain, flags, ...) carries when it opens a prepared
    XA transaction (``FL_PREPARED_XA``), written as the binlog writes it in XA statements; else None."""
    if not flags & _FL_PREPARED_XA or flags & _FL_COMPLETED_XA:
        return None
    p = start + 13 + (8 if flags & _FL_GROUP_COMMIT_ID else 0)
    if p + 6 > end:
        raise ValueError("a MariaDB XA GTID event without its xid")
    format_id, gtrid_length, bqual_length = struct.unpack_from("<iBB", body, p)
    p += 6
    if gtrid_length > 64 or bqual_length > 64 or p + gtrid_length + bqual_length > end:
        raise ValueError(f"a MariaDB XA GTID event with an xid of {gtrid_length}+{bqual_length} bytes")
    gtrid = bytes(body[p : p + gtrid_length])
    bqual = bytes(body[p + gtrid_length : p + gtrid_length + bqual_length])
    return f"X'{gtrid.hex()}',X'{bqual.hex()}',{format_id}"


_HEX_PART = re.compile(r"^\s*[xX]'([0-9a-fA-F]*)'\s*$")
_QUOTED_PART = re.compile(r"^\s*'((?:[^'\\]|''|\\.)*)'\s*$")
_ONE_PHASE = re.compile(r"\s+ONE\s+PHASE\s*;?\s*$", re.IGNORECASE)


def xid_key(xid: str) -> str:
    """One spelling per xid, for comparing the xid of an XA statement with the one its prepared rows carry:
    ``'x1'``, ``X'7831'`` and ``X'7831',X'',1`` name the same xid (gtrid, bqual, formatID 1 by default);
    a trailing ``ONE PHASE`` is not part of it."""
    text = _ONE_PHASE.sub("", xid.strip().rstrip(";").strip())
    parts = _split_top(text)
    gtrid = _part_hex(parts[0]) if parts else ""
    bqual = _part_hex(parts[1]) if len(parts) > 1 else ""
    format_id = parts[2].strip() if len(parts) > 2 else "1"
    if gtrid is None or bqual is None:
        return text  # a spelling this does not know: compared as written
    return f"{gtrid}:{bqual}:{format_id}"


def _split_top(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in text:
        if ch == "'":
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _part_hex(part: str) -> str | None:
    hexed = _HEX_PART.match(part)
    if hexed:
        return hexed[1].lower()
    quoted = _QUOTED_PART.match(part)
    if quoted:
        return quoted[1].replace("''", "'").encode().hex()
    return None
