"""The one error type for bad user input (scenario files, emulator configs): the CLI exits 2 with its message."""


class InputError(Exception):
    """The message names the file, the field and what is allowed."""
