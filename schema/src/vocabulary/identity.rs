//! Users, their devices, the pushes sent to them and the tokens mailed to
//! them (decisions §9).

crate::text_enum! {
    /// A disabled user cannot log in.
    pub enum UserStatus {
        Active = "active",
        Disabled = "disabled",
    }
}

crate::text_enum! {
    /// A revoked device receives no more pushes.
    pub enum DeviceStatus {
        Active = "active",
        Revoked = "revoked",
    }
}

crate::text_enum! {
    /// The device's operating system, which picks the push service (APNs, FCM).
    pub enum Platform {
        Ios = "ios",
        Android = "android",
    }
}

crate::text_enum! {
    /// One push to one device: pending until the provider answers.
    pub enum PushStatus {
        Pending = "pending",
        Delivered = "delivered",
        Failed = "failed",
    }
}

crate::text_enum! {
    /// The two things a mailed token can prove.
    pub enum Purpose {
        VerifyEmail = "verify_email",
        PasswordReset = "password_reset",
    }
}
