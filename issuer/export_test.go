package issuer

// RoomKeys exposes roomKeys to the external tests (package issuer_test):
// the keys of a room in the order the scripts expect.
var RoomKeys = roomKeys
