"""placeholder"""


class LocalBinlogSource:  # pragma: no cover
    pass
