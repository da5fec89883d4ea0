//! Landlock rules for the payload.
