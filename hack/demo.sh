#!/usr/bin/env bash
# demo.sh is `make demo`: builds what it needs and runs test/demo (see there).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash hack/testbin.sh control-plane >/dev/null
bash hack/testbin.sh nats 2.15.2 >/dev/null
bash hack/testbin.sh nats 2.15.1 >/dev/null
exec go run ./test/demo
