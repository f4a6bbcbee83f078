// Geo's places and distances live in `Places` (alerts names places with them too); every file
// of geo, and whoever imports it, sees them as before.
@_exported import Places
