//! Object-storage tiering for Strata (uploads, manifests, cold reads, restore). Empty until the
//! tiering issue lands: nothing here pretends to work yet.
