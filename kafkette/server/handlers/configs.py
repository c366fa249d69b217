"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44)."""

from __future__ import annotations
