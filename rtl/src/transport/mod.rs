//! The RC transport engines and their state: the Requester (WQE → request packets), the Responder (requests
//! → memory, ACK/NAK, READ responses, atomics), the Completer (responses → completions, go-back-N), and what
//! they share: QP Context, PSN Check, Key Cache and the Atomic Unit.
pub mod atomic_unit;
pub mod completer;
pub mod key_cache;
pub mod psn_check;
pub mod qp_context;
pub mod requester;
pub mod responder;
