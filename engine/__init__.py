"""Attribution engine: rules, extract → correlate → decide, results, CLI."""
