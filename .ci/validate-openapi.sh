#!/usr/bin/env bash
# Validates OpenAPI documents as 3.0 with an independent validator
# (openapi-spec-validator, from PyPI). Exits non-zero on the first invalid one.
#
#   .ci/validate-openapi.sh FILE...
set -euo pipefail
if ! python3 -c "import openapi_spec_validator" 2>/dev/null; then
    python3 -m pip install --quiet openapi-spec-validator
fi
python3 - "$@" <<'PY'
import json
import sys

from openapi_spec_validator import validate
from openapi_spec_validator.validation import OpenAPIV30SpecValidator

for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as handle:
        document = json.load(handle)
    version = str(document.get("openapi", ""))
    if not version.startswith("3.0."):
        sys.exit(f"{path}: declares openapi {version!r}, not 3.0.x")
    try:
        validate(document, cls=OpenAPIV30SpecValidator)
    except Exception as error:  # the validator's own message is the report
        sys.exit(f"{path}: invalid OpenAPI 3.0: {error}")
    paths = len(document.get("paths", {}))
    print(f"{path}: valid OpenAPI {version} ({paths} paths)")
PY
