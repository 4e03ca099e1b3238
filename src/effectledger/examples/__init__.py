"""Worked examples of registered actions, used by the demo, the docs and the tests."""
