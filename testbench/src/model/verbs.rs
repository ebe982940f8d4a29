//! The verbs vocabulary (work requests, completions, QP attributes, errors) is the driver's
//! ([`rnic_driver::verbs`]); the golden model speaks the same.

pub use rnic_driver::verbs::*;
