"""Domain model shared by every role: constants, quantities, selectors, typed views."""
