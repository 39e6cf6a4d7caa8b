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


class RequestError(SomaError):
    """A request to run that is refused before S2 starts (an unknown monitor, an h that is no number
    above 0, messages that do not end with the user's): the caller's to fix, as an HTTP 4xx is."""


class PromptTooLong(RequestError):
    """The prompt (with the tokens asked for) does not fit S2's context."""

    def __init__(self, message: str, prompt_tokens: int, context: int) -> None:
        super().__init__(message)
        self.prompt_tokens, self.context = prompt_tokens, context
