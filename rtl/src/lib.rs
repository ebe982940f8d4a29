pub mod icrc;
