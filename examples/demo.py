"""`make demo`: the main job end to end on local defaults."""

from __future__ import annotations

import running_count

if __name__ == "__main__":
    print("== keyed running count on the heap backend ==")
    running_count.main()
