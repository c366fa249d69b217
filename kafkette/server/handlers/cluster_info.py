"""DescribeCluster (60) and DescribeLogDirs (35)."""

from __future__ import annotations
