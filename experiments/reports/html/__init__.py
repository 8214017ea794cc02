"""The sample-level HTML report: one self-contained page per sweep or import (issue 34)."""
