//! Capabilities: every set emptied in the payload.
