//! The state file on disk: taken under an exclusive lock before anything else, read
//! (a corrupt file is moved aside, never fatal), and written atomically.
