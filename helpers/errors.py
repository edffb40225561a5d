"""The library's error for a bad argument: names the argument, the value given and what is allowed."""


class ArgumentError(ValueError):
    """A function of `helpers` got an argument value that is not allowed."""

    kind = "Argument"

    def __init__(self, name: str, value, allowed: str):
        self.name, self.value, self.allowed = name, value, allowed
        super().__init__(f"{self.kind} {name}: got {value!r} ({type(value).__name__}); allowed: {allowed}.")
