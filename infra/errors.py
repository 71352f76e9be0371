"""The synth-time error every construct raises for a bad parameter."""


class ConfigurationError(ValueError):
    """A construct parameter is invalid; the message names the construct and the parameter."""

    def __init__(self, owner: str, parameter: str, problem: str) -> None:
        super().__init__(f"{owner}: invalid {parameter}: {problem}")
        self.owner = owner
        self.parameter = parameter
