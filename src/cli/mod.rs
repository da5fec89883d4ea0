//! clap definitions only.
