"""canal.lake.forms.variant: typed images to Spark VARIANT and back.

Round trips of random layouts and values (hypothesis), the encoded bytes read by pyspark's own variant reader as an
outside reference, variants pyspark's builder wrote (other header sizes) decoded, errors typed and naming field and
row, malformed bytes never escaping as another exception, and one real local Spark session reading the variants
with ``variant_get`` and handing them back through ``mapInArrow``.

``VARIANT_EXAMPLES`` (default 60) sets the hypothesis examples per property for a longer run.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canal.lake.forms.variant import VariantError, decode, encode, variant_arrow_type
from canal.lake.types import MirrorTypeError

pyspark_types = pytest.importorskip("pyspark.sql.types")

EXAMPLES = int(os.environ.get("VARIANT_EXAMPLES", "60"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# MySQL identifiers: the Basic Multilingual Plane without U+0000 (dots, spaces, unicode allowed when quoted)
_NAME_CHARS = st.characters(min_codepoint=1, max_codepoint=0xFFFF, exclude_categories=("Cs",))
names = st.text(_NAME_CHARS, min_size=1, max_size=64) | st.sampled_from([".", "a.b", " ", "é", "Z", "_", "id"])


@st.composite
def arrow_types(draw: Any) -> pa.DataType:
    kind = draw(st.sampled_from(["int64", "float64", "decimal", "date32", "timestamp", "binary", "string"]))
    if kind == "decimal":
        precision = draw(st.integers(1, 38))
        return pa.decimal128(precision, draw(st.integers(0, precision)))
    return {
        "int64": pa.int64(),
        "float64": pa.float64(),
        "date32": pa.date32(),
        "timestamp": pa.timestamp("us"),
        "binary": pa.binary(),
        "string": pa.string(),
    }[kind]


def _decimals(kind: pa.Decimal128Type) -> st.SearchStrategy[Decimal]:
    top = 10**kind.precision - 1
    unscaled = st.integers(-top, top) | st.sampled_from([top, -top, 0, 1, -1])

    def as_decimal(u: int) -> Decimal:
        digits = tuple(int(c) for c in str(abs(u)))
        return Decimal((u < 0, digits, -kind.scale))  # exact: no context rounding of 38 digits

    return unscaled.map(as_decimal)


_LONG = st.sampled_from([65, 300, 70_000])


def values_of(kind: pa.DataType) -> st.SearchStrategy[Any]:
    if pa.types.is_int64(kind):
        return st.integers(-(2**63), 2**63 - 1) | st.sampled_from([-(2**63), 2**63 - 1, 0, 127, -128, 128, 32768])
    if pa.types.is_float64(kind):
        return st.floats() | st.sampled_from([-0.0, math.nan, math.inf, -math.inf, 5e-324])
    if pa.types.is_decimal(kind):
        return _decimals(kind)
    if pa.types.is_date32(kind):
        return st.dates() | st.sampled_from([dt.date(1, 1, 1), dt.date(9999, 12, 31)])
    if pa.types.is_timestamp(kind):
        return st.datetimes() | st.sampled_from([dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)])
    if pa.types.is_binary(kind):
        return st.binary(max_size=80) | _LONG.map(lambda n: bytes(range(256)) * (n // 256) + b"\x01" * (n % 256))
    return st.text(max_size=80) | _LONG.map(lambda n: "é" * (n // 2) + "x" * (n % 2))


@st.composite
def images(draw: Any) -> pa.StructArray:
    """A struct array as Layout.typed_image makes: 1-12 typed columns, rows with null cells and null images."""
    column_names = draw(st.lists(names, min_size=1, max_size=12, unique_by=str.lower))
    kinds = [draw(arrow_types()) for _ in column_names]
    rows = draw(st.integers(0, 12))
    present = draw(st.lists(st.booleans(), min_size=rows, max_size=rows))
    columns = []
    for kind in kinds:
        cells = draw(st.lists(st.none() | values_of(kind), min_size=rows, max_size=rows))
        columns.append(pa.array([c if p else None for c, p in zip(cells, present, strict=True)], kind))
    fields = [pa.field(n, k) for n, k in zip(column_names, kinds, strict=True)]
    mask = pa.array([not p for p in present], pa.bool_())
    array = pa.StructArray.from_arrays(columns, fields=fields, mask=mask)
    start = draw(st.integers(0, min(rows, 2)))
    return array.slice(start)  # an offset into the buffers, as a sliced batch has


def comparable(value: Any) -> Any:
    """Values compared exactly: floats by their bits (NaN, -0.0), decimals with their scale."""
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, Decimal):
        return ("decimal", value.as_tuple())
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def _variant_values(variants: pa.StructArray) -> list[Any]:
    """Each row through pyspark's own reader (None for a null variant)."""
    out = []
    with decimal.localcontext(prec=100):  # its Decimal(unscaled) * 10**-scale would round 38 digits at 28
        for row in variants.to_pylist():
            out.append(None if row is None else pyspark_types.VariantVal(row["value"], row["metadata"]).toPython())
    return out


def test_arrow_type_is_pysparks() -> None:
    from pyspark.sql.pandas.types import to_arrow_type

    theirs = to_arrow_type(pyspark_types.VariantType())
    ours = variant_arrow_type()
    assert ours == theirs
    assert [(f.name, f.nullable, f.metadata) for f in ours] == [(f.name, f.nullable, f.metadata) for f in theirs]


@PROPERTY
@given(images())
def test_round_trip(image: pa.StructArray) -> None:
    variants = encode(image)
    assert variants.type == variant_arrow_type()
    assert len(variants) == len(image)
    assert variants.is_valid().to_pylist() == image.is_valid().to_pylist()
    back = decode(variants, image.type)
    assert back.type == image.type
    assert comparable(back.to_pylist()) == comparable(image.to_pylist())
    chunked = pa.chunked_array([variants.slice(0, len(variants) // 2), variants.slice(len(variants) // 2)])
    assert comparable(decode(chunked, image.type).to_pylist()) == comparable(image.to_pylist())


@PROPERTY
@given(images())
def test_pyspark_reads_what_encode_wrote(image: pa.StructArray) -> None:
    variants = encode(image)
    metadata = {row["metadata"] for row in variants.to_pylist() if row is not None}
    assert len(metadata) <= 1  # one dictionary, the same bytes on every row
    assert comparable(_variant_values(variants)) == comparable(image.to_pylist())


def test_sizes_are_the_smallest_chosen() -> None:
    image = pa.array(
        [{"a": 1, "b": "x", "c": Decimal("1.50")}, {"a": -(2**40), "b": "y" * 64, "c": Decimal("-12345678901.00")}],
        pa.struct([("a", pa.int64()), ("b", pa.string()), ("c", pa.decimal128(20, 2))]),
    )
    small, large = (row["value"] for row in encode(image).to_pylist())
    # header, 3 fields, 1-byte ids, 1-byte offsets (4); int8 (2); short string (2); decimal4 (1 + scale + 4)
    assert len(small) == 2 + 3 + 4 + 2 + 2 + 6
    # int64 (9); long string (1 + 4 + 64); decimal8 (1 + scale + 8)
    assert len(large) == 2 + 3 + 4 + 9 + 69 + 10
    with decimal.localcontext(prec=100):
        assert pyspark_types.VariantVal(small, encode(image)[0]["metadata"].as_py()).toJson() == (
            '{"a":1,"b":"x","c":1.50}'
        )


def test_wide_and_long_rows() -> None:
    """300 fields (4-byte num_elements, 2-byte field ids) and a 70,000-byte string (3-byte offsets)."""
    kind = pa.struct([(f"c{i}", pa.int64()) for i in range(299)] + [("text", pa.string())])
    rows = [
        {**{f"c{i}": i * 1000 for i in range(299)}, "text": "t" * 70_000},
        None,
        {f"c{i}": None for i in range(299)},
    ]
    image = pa.array(rows, kind)
    variants = encode(image)
    value = variants[0]["value"].as_py()
    assert value[0] == 2 | (2 | 1 << 2 | 1 << 4) << 2  # object; offsets 3 bytes, ids 2 bytes, large
    assert int.from_bytes(value[1:5], "little") == 300
    assert comparable(_variant_values(variants)) == comparable(image.to_pylist())
    assert comparable(decode(variants, kind).to_pylist()) == comparable(image.to_pylist())


def test_null_image_and_null_cells() -> None:
    kind = pa.struct([("k", pa.int64()), ("v", pa.string())])
    image = pa.array([None, {"k": None, "v": None}, {"k": 7, "v": None}], kind)
    variants = encode(image)
    assert variants.to_pylist()[0] is None
    assert _variant_values(variants) == [None, {"k": None, "v": None}, {"k": 7, "v": None}]
    assert decode(variants, kind).to_pylist() == image.to_pylist()


def _json_variants(texts: list[str | None]) -> pa.StructArray:
    """Variants written by pyspark's own builder (its header, id and offset sizes, its metadata)."""
    from pyspark.sql.variant_utils import VariantUtils

    rows = [None if t is None else VariantUtils.parse_json(t) for t in texts]
    value = pa.array([b"" if r is None else r[0] for r in rows], pa.binary())
    metadata = pa.array([b"" if r is None else r[1] for r in rows], pa.binary())
    mask = pa.array([r is None for r in rows])
    return pa.StructArray.from_arrays([value, metadata], fields=list(variant_arrow_type()), mask=mask)


def test_decodes_variants_of_other_writers() -> None:
    kind = pa.struct([("name", pa.string()), ("id", pa.int64()), ("price", pa.decimal128(5, 2))])
    theirs = _json_variants(
        ['{"id": 1, "name": "a", "price": 1.50}', None, '{"price": -999.99, "id": 70000, "name": null}']
    )
    ours = encode(pa.array([{"name": "é" * 40, "id": -1, "price": Decimal("0.00")}], kind))
    both = pa.chunked_array([theirs, ours])  # two metadata dictionaries, two header layouts
    assert decode(both, kind).to_pylist() == [
        {"name": "a", "id": 1, "price": Decimal("1.50")},
        None,
        {"name": None, "id": 70000, "price": Decimal("-999.99")},
        {"name": "é" * 40, "id": -1, "price": Decimal("0.00")},
    ]


_KIND = pa.struct([("id", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(12, 2))])
_ROWS = [{"id": 1, "name": "a", "amount": Decimal("1.50")}, None, {"id": 2, "name": "b", "amount": Decimal("99.00")}]


@pytest.mark.parametrize(
    ("target", "words"),
    [
        (pa.struct([("id", pa.string()), ("name", pa.string()), ("amount", pa.decimal128(12, 2))]), ["'id'", "int8"]),
        (pa.struct([("id", pa.int64()), ("name", pa.int64()), ("amount", pa.decimal128(12, 2))]), ["'name'", "string"]),
        (pa.struct([("id", pa.int64()), ("name", pa.string())]), ["'amount'", "not in the image"]),
        (pa.struct([*_KIND, pa.field("extra", pa.int64())]), ["'extra'", "missing"]),
        (
            pa.struct([("id", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(12, 3))]),
            ["'amount'", "scale 2"],
        ),
        (
            pa.struct([("id", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(3, 2))]),
            ["'amount'", "3 digits"],
        ),
        (
            pa.struct([("id", pa.float64()), ("name", pa.string()), ("amount", pa.decimal128(12, 2))]),
            ["'id'", "double"],
        ),
        (
            pa.struct([("id", pa.timestamp("us", "UTC")), ("name", pa.string()), ("amount", pa.decimal128(12, 2))]),
            ["'id'"],
        ),
    ],
)
def test_decode_refuses_another_shape(target: pa.StructType, words: list[str]) -> None:
    variants = encode(pa.array(_ROWS, _KIND))
    before = variants.to_pylist()
    with pytest.raises(VariantError) as raised:
        decode(variants, target)
    assert isinstance(raised.value, MirrorTypeError)
    message = str(raised.value)
    assert all(word in message for word in words), message
    if "row" in message:
        assert "variant row 2" in message or "variant row 0" in message, message
    assert variants.to_pylist() == before  # the input is left as it was


def test_error_names_the_failing_row() -> None:
    kind = pa.struct([("id", pa.int64())])
    theirs = _json_variants(['{"id": 1}', None, '{"id": 2}', '{"id": "three"}'])
    with pytest.raises(VariantError, match=r"variant row 3, field 'id': a value of variant type string"):
        decode(theirs, kind)
    with pytest.raises(VariantError, match=r"variant row 1: a value of variant type int8, not an object"):
        decode(_json_variants(['{"id": 1}', "5"]), kind)


def test_encode_refuses_other_types_and_repeated_names() -> None:
    image = pa.array([{"t": 1}], pa.struct([("t", pa.int32())]))
    with pytest.raises(VariantError, match="'t'"):
        encode(image)
    twice = pa.StructArray.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])
    with pytest.raises(VariantError, match=r"\['a'\] appear twice"):
        encode(twice)


@settings(max_examples=EXAMPLES * 2, deadline=None)
@given(st.data())
def test_malformed_bytes_raise_variant_error_only(data: Any) -> None:
    kind = pa.struct([("i", pa.int64()), ("s", pa.string()), ("d", pa.decimal128(20, 4)), ("b", pa.binary())])
    row = {"i": 300, "s": "x" * 70, "d": Decimal("-1.2345"), "b": b"\x00\x01"}
    value = bytearray(encode(pa.array([row], kind))[0]["value"].as_py())
    metadata = bytearray(encode(pa.array([row], kind))[0]["metadata"].as_py())
    target = data.draw(st.sampled_from(["value", "metadata"]))
    damaged = value if target == "value" else metadata
    if data.draw(st.booleans()):
        del damaged[data.draw(st.integers(0, len(damaged) - 1)) :]
    else:
        damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    variants = pa.StructArray.from_arrays(
        [pa.array([bytes(value)], pa.binary()), pa.array([bytes(metadata)], pa.binary())],
        fields=list(variant_arrow_type()),
    )
    try:
        back = decode(variants, kind)
    except VariantError:
        return
    assert back.type == kind  # a changed byte may still be a valid variant of the image: then it decodes as one


@pytest.mark.spark
def test_spark_reads_and_hands_back_encoded_variants(spark: Any) -> None:
    kind = pa.struct(
        [
            ("id", pa.int64()),
            ("price", pa.float64()),
            ("amount", pa.decimal128(12, 2)),
            ("day", pa.date32()),
            ("at", pa.timestamp("us")),
            ("blob", pa.binary()),
            ("name", pa.string()),
        ]
    )
    rows = [
        {
            "id": -(2**63),
            "price": -0.5,
            "amount": Decimal("1.50"),
            "day": dt.date(1, 1, 1),
            "at": dt.datetime(2024, 2, 29, 23, 59, 59, 123456),
            "blob": b"\x00\xff",
            "name": "é" * 70,
        },
        None,
        {"id": 7, "price": None, "amount": None, "day": None, "at": None, "blob": None, "name": "x.y"},
    ]
    image = pa.array(rows, kind)
    frame = spark.createDataFrame(pa.table({"k": [0, 1, 2], "after": encode(image)}), "k long, after variant")
    spark_types = {
        "id": "bigint",
        "price": "double",
        "amount": "decimal(12,2)",
        "day": "date",
        "at": "timestamp_ntz",
        "blob": "binary",
        "name": "string",
    }
    selected = [f"variant_get(after, '$.{n}', '{t}') AS {n}" for n, t in spark_types.items()]
    got = {r["k"]: r.asDict() for r in frame.selectExpr("k", *selected).collect()}
    for k, row in enumerate(rows):
        expected = {n: None for n in spark_types} if row is None else row
        assert comparable({n: got[k][n] for n in spark_types}) == comparable(expected)

    def hand_back(batches: Any) -> Any:
        for b in batches:
            after = b.column(1)
            yield pa.RecordBatch.from_arrays(
                [b.column(0), after.field("value"), after.field("metadata"), after.is_valid()],
                names=["k", "value", "metadata", "present"],
            )

    # beside them a variant Spark's own writer made (its header sizes, metadata and integer widths)
    theirs = spark.sql(
        "SELECT 3L AS k, to_variant_object(named_struct('id', 5L, 'price', 2.5D, 'amount', CAST(1.50 AS DECIMAL(12,2)),"
        " 'day', DATE'2024-01-02', 'at', TIMESTAMP_NTZ'2024-01-02 03:04:05.000006', 'blob', X'00FF', 'name', 'abc'))"
        " AS after"
    )
    written = {
        "id": 5,
        "price": 2.5,
        "amount": Decimal("1.50"),
        "day": dt.date(2024, 1, 2),
        "at": dt.datetime(2024, 1, 2, 3, 4, 5, 6),
        "blob": b"\x00\xff",
        "name": "abc",
    }
    both = frame.unionByName(theirs)
    returned = both.mapInArrow(hand_back, "k long, value binary, metadata binary, present boolean").toArrow()
    returned = returned.sort_by("k")
    variants = pa.StructArray.from_arrays(
        [returned["value"].combine_chunks(), returned["metadata"].combine_chunks()],
        fields=list(variant_arrow_type()),
        mask=pa.compute.invert(returned["present"].combine_chunks()),
    )
    assert comparable(decode(variants, kind).to_pylist()) == comparable([*image.to_pylist(), written])
