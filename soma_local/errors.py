"""Errors a user can act on. Each message names the file, field or service at fault."""


class SomaError(Exception):
    """Base class: the CLI prints these as one clear line instead of a traceback."""


class MonitorFileError(SomaError):
    pass


class ModelFileError(SomaError):
    pass


class S1Error(SomaError):
    pass


class DataError(SomaError):
    pass
