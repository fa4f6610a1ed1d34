"""The check the examples that need packages beyond the core start with (langchain_callback.py,
llamaindex_evaluator.py, ray_evaluate.py): without them, one line saying what to install (the
install line of the example's own docstring) and exit 2, as _openai_key.py does for a key."""

import contextlib
import re
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def needs(doc: str | None) -> Iterator[None]:
    """Run the example's imports; a missing package ends the example with its install line."""
    try:
        yield
    except ImportError as exc:
        line = re.search(r"pip[ ]install [^)`\n]+", doc or "")
        fix = line.group(0) if line else "see the example's docstring"
        missing = exc.name or str(exc)
        where = "from the top of this repository"
        print(f"this example needs {missing}: {fix} ({where})", file=sys.stderr)
        sys.exit(2)
