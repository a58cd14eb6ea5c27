include!("../fs/build.rs");
