package results

var Num = num
