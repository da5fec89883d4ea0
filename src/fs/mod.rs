//! The mount plan: a list of operations (pure data, unit-tested), and the code that applies it.
