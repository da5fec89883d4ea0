//! `cordon-oci`: cordon as an OCI runtime, with runc's command line (the same code as
//! `cordon oci ...`), for podman, containerd and Kubernetes.

use clap::Parser;
use cordon::cli::oci::OciCli;

/// cordon's heap (see `cordon::sys::Heap`): fewer page faults and TLB flushes at start-up.
#[global_allocator]
static ALLOCATOR: cordon::sys::Heap = cordon::sys::Heap;

fn main() {
    let cli = match OciCli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.use_stderr() { 1 } else { 0 });
        }
    };
    // Its commands print and exit; the container's own stdio never goes through it.
    cordon::sys::default_sigpipe();
    std::process::exit(cordon::oci::main(cli));
}
