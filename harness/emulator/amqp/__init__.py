"""The emulator's own AMQP 1.0 engine: type codec, frames, performatives and message sections."""
