#!/usr/bin/env bash
# Source at the start of a device-tool run (carry [".whl"]): installs the wheels fetched by
# ../shared/gpu/fetch-wheels into /tmp/site and puts them and the package on PYTHONPATH.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site:$PWD/server${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
