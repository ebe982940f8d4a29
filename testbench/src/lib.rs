pub mod crc;
pub mod decode;
pub mod mac;
pub mod model;
pub mod wire;
