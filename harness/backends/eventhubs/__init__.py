"""Event Hubs backends: the project's emulator (`harness.emulator`, a supervised process on loopback) or a real
namespace. Both are driven through the unmodified azure-eventhub SDK, as production would.

The package is the backend kind `eventhubs`: `SPEC` is its `[backend]` model (harness.backends finds it by the
package's name)."""
from harness.backends.eventhubs.spec import EventHubsSpec as SPEC

__all__ = ["SPEC"]
