pub mod corpus;
pub mod identity;
pub mod init;
pub mod schema;
