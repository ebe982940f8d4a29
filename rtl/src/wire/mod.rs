//! The Ethernet side: frames out to the MAC (TX request arbiter → TX Packet Build → ICRC append → TX Frame
//! Buffer → TX frame mux) and frames in from it (RX Parse with its ICRC check, the ARP responder).
pub mod arp;
pub mod csum;
pub mod icmp;
pub mod icrc;
pub mod ndp;
pub mod rx_parse;
pub mod tx_arb;
pub mod tx_buf;
pub mod tx_build;
pub mod tx_icrc;
pub mod tx_mux;
pub mod vlan_insert;
pub mod vlan_strip;
