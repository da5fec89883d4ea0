//! `cordon doctor`: which mechanisms this host offers, and the fix for each missing one.
