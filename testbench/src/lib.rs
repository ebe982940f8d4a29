pub mod crc;
pub mod decode;
pub mod driver;
pub mod host;
pub mod mac;
pub mod model;
pub mod wire;
