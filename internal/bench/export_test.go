package bench

// PairedShare is pairedShare, for the external tests.
var PairedShare = pairedShare
