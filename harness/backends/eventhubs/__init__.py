"""Event Hubs backends: the project's emulator (`harness.emulator`, a supervised process on loopback) or a real
namespace. Both are driven through the unmodified azure-eventhub SDK, as production would."""
