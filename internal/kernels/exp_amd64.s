#include "textflag.h"

// Vector forms of Exp, Sigmoid, SiLU, Erf, Tanh and the GELUs (exp.go, special.go,
// linear.go) on 8 float32 lanes with AVX2: the same float32 operations in the same order
// (no fused multiply-add), so every lane gives the bits of the Go function. Constants are
// 8-lane vectors, named as in the Go code.

DATA kc<>+0(SB)/4, $0x3fb8aa3b
DATA kc<>+4(SB)/4, $0x3fb8aa3b
DATA kc<>+8(SB)/4, $0x3fb8aa3b
DATA kc<>+12(SB)/4, $0x3fb8aa3b
DATA kc<>+16(SB)/4, $0x3fb8aa3b
DATA kc<>+20(SB)/4, $0x3fb8aa3b
DATA kc<>+24(SB)/4, $0x3fb8aa3b
DATA kc<>+28(SB)/4, $0x3fb8aa3b
DATA kc<>+32(SB)/4, $0x3f318000
DATA kc<>+36(SB)/4, $0x3f318000
DATA kc<>+40(SB)/4, $0x3f318000
DATA kc<>+44(SB)/4, $0x3f318000
DATA kc<>+48(SB)/4, $0x3f318000
DATA kc<>+52(SB)/4, $0x3f318000
DATA kc<>+56(SB)/4, $0x3f318000
DATA kc<>+60(SB)/4, $0x3f318000
DATA kc<>+64(SB)/4, $0xb95e8083
DATA kc<>+68(SB)/4, $0xb95e8083
DATA kc<>+72(SB)/4, $0xb95e8083
DATA kc<>+76(SB)/4, $0xb95e8083
DATA kc<>+80(SB)/4, $0xb95e8083
DATA kc<>+84(SB)/4, $0xb95e8083
DATA kc<>+88(SB)/4, $0xb95e8083
DATA kc<>+92(SB)/4, $0xb95e8083
DATA kc<>+96(SB)/4, $0x39506967
DATA kc<>+100(SB)/4, $0x39506967
DATA kc<>+104(SB)/4, $0x39506967
DATA kc<>+108(SB)/4, $0x39506967
DATA kc<>+112(SB)/4, $0x39506967
DATA kc<>+116(SB)/4, $0x39506967
DATA kc<>+120(SB)/4, $0x39506967
DATA kc<>+124(SB)/4, $0x39506967
DATA kc<>+128(SB)/4, $0x3ab743ce
DATA kc<>+132(SB)/4, $0x3ab743ce
DATA kc<>+136(SB)/4, $0x3ab743ce
DATA kc<>+140(SB)/4, $0x3ab743ce
DATA kc<>+144(SB)/4, $0x3ab743ce
DATA kc<>+148(SB)/4, $0x3ab743ce
DATA kc<>+152(SB)/4, $0x3ab743ce
DATA kc<>+156(SB)/4, $0x3ab743ce
DATA kc<>+160(SB)/4, $0x3c088908
DATA kc<>+164(SB)/4, $0x3c088908
DATA kc<>+168(SB)/4, $0x3c088908
DATA kc<>+172(SB)/4, $0x3c088908
DATA kc<>+176(SB)/4, $0x3c088908
DATA kc<>+180(SB)/4, $0x3c088908
DATA kc<>+184(SB)/4, $0x3c088908
DATA kc<>+188(SB)/4, $0x3c088908
DATA kc<>+192(SB)/4, $0x3d2aa9c1
DATA kc<>+196(SB)/4, $0x3d2aa9c1
DATA kc<>+200(SB)/4, $0x3d2aa9c1
DATA kc<>+204(SB)/4, $0x3d2aa9c1
DATA kc<>+208(SB)/4, $0x3d2aa9c1
DATA kc<>+212(SB)/4, $0x3d2aa9c1
DATA kc<>+216(SB)/4, $0x3d2aa9c1
DATA kc<>+220(SB)/4, $0x3d2aa9c1
DATA kc<>+224(SB)/4, $0x3e2aaaaa
DATA kc<>+228(SB)/4, $0x3e2aaaaa
DATA kc<>+232(SB)/4, $0x3e2aaaaa
DATA kc<>+236(SB)/4, $0x3e2aaaaa
DATA kc<>+240(SB)/4, $0x3e2aaaaa
DATA kc<>+244(SB)/4, $0x3e2aaaaa
DATA kc<>+248(SB)/4, $0x3e2aaaaa
DATA kc<>+252(SB)/4, $0x3e2aaaaa
DATA kc<>+256(SB)/4, $0x3f000000
DATA kc<>+260(SB)/4, $0x3f000000
DATA kc<>+264(SB)/4, $0x3f000000
DATA kc<>+268(SB)/4, $0x3f000000
DATA kc<>+272(SB)/4, $0x3f000000
DATA kc<>+276(SB)/4, $0x3f000000
DATA kc<>+280(SB)/4, $0x3f000000
DATA kc<>+284(SB)/4, $0x3f000000
DATA kc<>+288(SB)/4, $0x3f800000
DATA kc<>+292(SB)/4, $0x3f800000
DATA kc<>+296(SB)/4, $0x3f800000
DATA kc<>+300(SB)/4, $0x3f800000
DATA kc<>+304(SB)/4, $0x3f800000
DATA kc<>+308(SB)/4, $0x3f800000
DATA kc<>+312(SB)/4, $0x3f800000
DATA kc<>+316(SB)/4, $0x3f800000
DATA kc<>+320(SB)/4, $0x42fe0000
DATA kc<>+324(SB)/4, $0x42fe0000
DATA kc<>+328(SB)/4, $0x42fe0000
DATA kc<>+332(SB)/4, $0x42fe0000
DATA kc<>+336(SB)/4, $0x42fe0000
DATA kc<>+340(SB)/4, $0x42fe0000
DATA kc<>+344(SB)/4, $0x42fe0000
DATA kc<>+348(SB)/4, $0x42fe0000
DATA kc<>+352(SB)/4, $0x0000007f
DATA kc<>+356(SB)/4, $0x0000007f
DATA kc<>+360(SB)/4, $0x0000007f
DATA kc<>+364(SB)/4, $0x0000007f
DATA kc<>+368(SB)/4, $0x0000007f
DATA kc<>+372(SB)/4, $0x0000007f
DATA kc<>+376(SB)/4, $0x0000007f
DATA kc<>+380(SB)/4, $0x0000007f
DATA kc<>+384(SB)/4, $0xc2aeac4f
DATA kc<>+388(SB)/4, $0xc2aeac4f
DATA kc<>+392(SB)/4, $0xc2aeac4f
DATA kc<>+396(SB)/4, $0xc2aeac4f
DATA kc<>+400(SB)/4, $0xc2aeac4f
DATA kc<>+404(SB)/4, $0xc2aeac4f
DATA kc<>+408(SB)/4, $0xc2aeac4f
DATA kc<>+412(SB)/4, $0xc2aeac4f
DATA kc<>+416(SB)/4, $0x42b17217
DATA kc<>+420(SB)/4, $0x42b17217
DATA kc<>+424(SB)/4, $0x42b17217
DATA kc<>+428(SB)/4, $0x42b17217
DATA kc<>+432(SB)/4, $0x42b17217
DATA kc<>+436(SB)/4, $0x42b17217
DATA kc<>+440(SB)/4, $0x42b17217
DATA kc<>+444(SB)/4, $0x42b17217
DATA kc<>+448(SB)/4, $0x7f800000
DATA kc<>+452(SB)/4, $0x7f800000
DATA kc<>+456(SB)/4, $0x7f800000
DATA kc<>+460(SB)/4, $0x7f800000
DATA kc<>+464(SB)/4, $0x7f800000
DATA kc<>+468(SB)/4, $0x7f800000
DATA kc<>+472(SB)/4, $0x7f800000
DATA kc<>+476(SB)/4, $0x7f800000
DATA kc<>+480(SB)/4, $0x80000000
DATA kc<>+484(SB)/4, $0x80000000
DATA kc<>+488(SB)/4, $0x80000000
DATA kc<>+492(SB)/4, $0x80000000
DATA kc<>+496(SB)/4, $0x80000000
DATA kc<>+500(SB)/4, $0x80000000
DATA kc<>+504(SB)/4, $0x80000000
DATA kc<>+508(SB)/4, $0x80000000
DATA kc<>+512(SB)/4, $0x7fffffff
DATA kc<>+516(SB)/4, $0x7fffffff
DATA kc<>+520(SB)/4, $0x7fffffff
DATA kc<>+524(SB)/4, $0x7fffffff
DATA kc<>+528(SB)/4, $0x7fffffff
DATA kc<>+532(SB)/4, $0x7fffffff
DATA kc<>+536(SB)/4, $0x7fffffff
DATA kc<>+540(SB)/4, $0x7fffffff
DATA kc<>+544(SB)/4, $0xb72676cb
DATA kc<>+548(SB)/4, $0xb72676cb
DATA kc<>+552(SB)/4, $0xb72676cb
DATA kc<>+556(SB)/4, $0xb72676cb
DATA kc<>+560(SB)/4, $0xb72676cb
DATA kc<>+564(SB)/4, $0xb72676cb
DATA kc<>+568(SB)/4, $0xb72676cb
DATA kc<>+572(SB)/4, $0xb72676cb
DATA kc<>+576(SB)/4, $0x38ee171c
DATA kc<>+580(SB)/4, $0x38ee171c
DATA kc<>+584(SB)/4, $0x38ee171c
DATA kc<>+588(SB)/4, $0x38ee171c
DATA kc<>+592(SB)/4, $0x38ee171c
DATA kc<>+596(SB)/4, $0x38ee171c
DATA kc<>+600(SB)/4, $0x38ee171c
DATA kc<>+604(SB)/4, $0x38ee171c
DATA kc<>+608(SB)/4, $0xba5eb61e
DATA kc<>+612(SB)/4, $0xba5eb61e
DATA kc<>+616(SB)/4, $0xba5eb61e
DATA kc<>+620(SB)/4, $0xba5eb61e
DATA kc<>+624(SB)/4, $0xba5eb61e
DATA kc<>+628(SB)/4, $0xba5eb61e
DATA kc<>+632(SB)/4, $0xba5eb61e
DATA kc<>+636(SB)/4, $0xba5eb61e
DATA kc<>+640(SB)/4, $0x3bab1bb9
DATA kc<>+644(SB)/4, $0x3bab1bb9
DATA kc<>+648(SB)/4, $0x3bab1bb9
DATA kc<>+652(SB)/4, $0x3bab1bb9
DATA kc<>+656(SB)/4, $0x3bab1bb9
DATA kc<>+660(SB)/4, $0x3bab1bb9
DATA kc<>+664(SB)/4, $0x3bab1bb9
DATA kc<>+668(SB)/4, $0x3bab1bb9
DATA kc<>+672(SB)/4, $0xbcdc1574
DATA kc<>+676(SB)/4, $0xbcdc1574
DATA kc<>+680(SB)/4, $0xbcdc1574
DATA kc<>+684(SB)/4, $0xbcdc1574
DATA kc<>+688(SB)/4, $0xbcdc1574
DATA kc<>+692(SB)/4, $0xbcdc1574
DATA kc<>+696(SB)/4, $0xbcdc1574
DATA kc<>+700(SB)/4, $0xbcdc1574
DATA kc<>+704(SB)/4, $0x3de7178a
DATA kc<>+708(SB)/4, $0x3de7178a
DATA kc<>+712(SB)/4, $0x3de7178a
DATA kc<>+716(SB)/4, $0x3de7178a
DATA kc<>+720(SB)/4, $0x3de7178a
DATA kc<>+724(SB)/4, $0x3de7178a
DATA kc<>+728(SB)/4, $0x3de7178a
DATA kc<>+732(SB)/4, $0x3de7178a
DATA kc<>+736(SB)/4, $0xbec093a3
DATA kc<>+740(SB)/4, $0xbec093a3
DATA kc<>+744(SB)/4, $0xbec093a3
DATA kc<>+748(SB)/4, $0xbec093a3
DATA kc<>+752(SB)/4, $0xbec093a3
DATA kc<>+756(SB)/4, $0xbec093a3
DATA kc<>+760(SB)/4, $0xbec093a3
DATA kc<>+764(SB)/4, $0xbec093a3
DATA kc<>+768(SB)/4, $0x3f906ebb
DATA kc<>+772(SB)/4, $0x3f906ebb
DATA kc<>+776(SB)/4, $0x3f906ebb
DATA kc<>+780(SB)/4, $0x3f906ebb
DATA kc<>+784(SB)/4, $0x3f906ebb
DATA kc<>+788(SB)/4, $0x3f906ebb
DATA kc<>+792(SB)/4, $0x3f906ebb
DATA kc<>+796(SB)/4, $0x3f906ebb
DATA kc<>+800(SB)/4, $0xb343510c
DATA kc<>+804(SB)/4, $0xb343510c
DATA kc<>+808(SB)/4, $0xb343510c
DATA kc<>+812(SB)/4, $0xb343510c
DATA kc<>+816(SB)/4, $0xb343510c
DATA kc<>+820(SB)/4, $0xb343510c
DATA kc<>+824(SB)/4, $0xb343510c
DATA kc<>+828(SB)/4, $0xb343510c
DATA kc<>+832(SB)/4, $0x358fe089
DATA kc<>+836(SB)/4, $0x358fe089
DATA kc<>+840(SB)/4, $0x358fe089
DATA kc<>+844(SB)/4, $0x358fe089
DATA kc<>+848(SB)/4, $0x358fe089
DATA kc<>+852(SB)/4, $0x358fe089
DATA kc<>+856(SB)/4, $0x358fe089
DATA kc<>+860(SB)/4, $0x358fe089
DATA kc<>+864(SB)/4, $0xb71ea9c4
DATA kc<>+868(SB)/4, $0xb71ea9c4
DATA kc<>+872(SB)/4, $0xb71ea9c4
DATA kc<>+876(SB)/4, $0xb71ea9c4
DATA kc<>+880(SB)/4, $0xb71ea9c4
DATA kc<>+884(SB)/4, $0xb71ea9c4
DATA kc<>+888(SB)/4, $0xb71ea9c4
DATA kc<>+892(SB)/4, $0xb71ea9c4
DATA kc<>+896(SB)/4, $0x37a9be60
DATA kc<>+900(SB)/4, $0x37a9be60
DATA kc<>+904(SB)/4, $0x37a9be60
DATA kc<>+908(SB)/4, $0x37a9be60
DATA kc<>+912(SB)/4, $0x37a9be60
DATA kc<>+916(SB)/4, $0x37a9be60
DATA kc<>+920(SB)/4, $0x37a9be60
DATA kc<>+924(SB)/4, $0x37a9be60
DATA kc<>+928(SB)/4, $0x39b4453f
DATA kc<>+932(SB)/4, $0x39b4453f
DATA kc<>+936(SB)/4, $0x39b4453f
DATA kc<>+940(SB)/4, $0x39b4453f
DATA kc<>+944(SB)/4, $0x39b4453f
DATA kc<>+948(SB)/4, $0x39b4453f
DATA kc<>+952(SB)/4, $0x39b4453f
DATA kc<>+956(SB)/4, $0x39b4453f
DATA kc<>+960(SB)/4, $0xbb86e0e0
DATA kc<>+964(SB)/4, $0xbb86e0e0
DATA kc<>+968(SB)/4, $0xbb86e0e0
DATA kc<>+972(SB)/4, $0xbb86e0e0
DATA kc<>+976(SB)/4, $0xbb86e0e0
DATA kc<>+980(SB)/4, $0xbb86e0e0
DATA kc<>+984(SB)/4, $0xbb86e0e0
DATA kc<>+988(SB)/4, $0xbb86e0e0
DATA kc<>+992(SB)/4, $0x3ccf65e8
DATA kc<>+996(SB)/4, $0x3ccf65e8
DATA kc<>+1000(SB)/4, $0x3ccf65e8
DATA kc<>+1004(SB)/4, $0x3ccf65e8
DATA kc<>+1008(SB)/4, $0x3ccf65e8
DATA kc<>+1012(SB)/4, $0x3ccf65e8
DATA kc<>+1016(SB)/4, $0x3ccf65e8
DATA kc<>+1020(SB)/4, $0x3ccf65e8
DATA kc<>+1024(SB)/4, $0xbddedc64
DATA kc<>+1028(SB)/4, $0xbddedc64
DATA kc<>+1032(SB)/4, $0xbddedc64
DATA kc<>+1036(SB)/4, $0xbddedc64
DATA kc<>+1040(SB)/4, $0xbddedc64
DATA kc<>+1044(SB)/4, $0xbddedc64
DATA kc<>+1048(SB)/4, $0xbddedc64
DATA kc<>+1052(SB)/4, $0xbddedc64
DATA kc<>+1056(SB)/4, $0xbf21fb8b
DATA kc<>+1060(SB)/4, $0xbf21fb8b
DATA kc<>+1064(SB)/4, $0xbf21fb8b
DATA kc<>+1068(SB)/4, $0xbf21fb8b
DATA kc<>+1072(SB)/4, $0xbf21fb8b
DATA kc<>+1076(SB)/4, $0xbf21fb8b
DATA kc<>+1080(SB)/4, $0xbf21fb8b
DATA kc<>+1084(SB)/4, $0xbf21fb8b
DATA kc<>+1088(SB)/4, $0xbf909edf
DATA kc<>+1092(SB)/4, $0xbf909edf
DATA kc<>+1096(SB)/4, $0xbf909edf
DATA kc<>+1100(SB)/4, $0xbf909edf
DATA kc<>+1104(SB)/4, $0xbf909edf
DATA kc<>+1108(SB)/4, $0xbf909edf
DATA kc<>+1112(SB)/4, $0xbf909edf
DATA kc<>+1116(SB)/4, $0xbf909edf
DATA kc<>+1120(SB)/4, $0x3982c7aa
DATA kc<>+1124(SB)/4, $0x3982c7aa
DATA kc<>+1128(SB)/4, $0x3982c7aa
DATA kc<>+1132(SB)/4, $0x3982c7aa
DATA kc<>+1136(SB)/4, $0x3982c7aa
DATA kc<>+1140(SB)/4, $0x3982c7aa
DATA kc<>+1144(SB)/4, $0x3982c7aa
DATA kc<>+1148(SB)/4, $0x3982c7aa
DATA kc<>+1152(SB)/4, $0x3b1b14a6
DATA kc<>+1156(SB)/4, $0x3b1b14a6
DATA kc<>+1160(SB)/4, $0x3b1b14a6
DATA kc<>+1164(SB)/4, $0x3b1b14a6
DATA kc<>+1168(SB)/4, $0x3b1b14a6
DATA kc<>+1172(SB)/4, $0x3b1b14a6
DATA kc<>+1176(SB)/4, $0x3b1b14a6
DATA kc<>+1180(SB)/4, $0x3b1b14a6
DATA kc<>+1184(SB)/4, $0xbc09dd9c
DATA kc<>+1188(SB)/4, $0xbc09dd9c
DATA kc<>+1192(SB)/4, $0xbc09dd9c
DATA kc<>+1196(SB)/4, $0xbc09dd9c
DATA kc<>+1200(SB)/4, $0xbc09dd9c
DATA kc<>+1204(SB)/4, $0xbc09dd9c
DATA kc<>+1208(SB)/4, $0xbc09dd9c
DATA kc<>+1212(SB)/4, $0xbc09dd9c
DATA kc<>+1216(SB)/4, $0x3cb286d6
DATA kc<>+1220(SB)/4, $0x3cb286d6
DATA kc<>+1224(SB)/4, $0x3cb286d6
DATA kc<>+1228(SB)/4, $0x3cb286d6
DATA kc<>+1232(SB)/4, $0x3cb286d6
DATA kc<>+1236(SB)/4, $0x3cb286d6
DATA kc<>+1240(SB)/4, $0x3cb286d6
DATA kc<>+1244(SB)/4, $0x3cb286d6
DATA kc<>+1248(SB)/4, $0xbd5d07e2
DATA kc<>+1252(SB)/4, $0xbd5d07e2
DATA kc<>+1256(SB)/4, $0xbd5d07e2
DATA kc<>+1260(SB)/4, $0xbd5d07e2
DATA kc<>+1264(SB)/4, $0xbd5d07e2
DATA kc<>+1268(SB)/4, $0xbd5d07e2
DATA kc<>+1272(SB)/4, $0xbd5d07e2
DATA kc<>+1276(SB)/4, $0xbd5d07e2
DATA kc<>+1280(SB)/4, $0x3e088880
DATA kc<>+1284(SB)/4, $0x3e088880
DATA kc<>+1288(SB)/4, $0x3e088880
DATA kc<>+1292(SB)/4, $0x3e088880
DATA kc<>+1296(SB)/4, $0x3e088880
DATA kc<>+1300(SB)/4, $0x3e088880
DATA kc<>+1304(SB)/4, $0x3e088880
DATA kc<>+1308(SB)/4, $0x3e088880
DATA kc<>+1312(SB)/4, $0xbeaaaaab
DATA kc<>+1316(SB)/4, $0xbeaaaaab
DATA kc<>+1320(SB)/4, $0xbeaaaaab
DATA kc<>+1324(SB)/4, $0xbeaaaaab
DATA kc<>+1328(SB)/4, $0xbeaaaaab
DATA kc<>+1332(SB)/4, $0xbeaaaaab
DATA kc<>+1336(SB)/4, $0xbeaaaaab
DATA kc<>+1340(SB)/4, $0xbeaaaaab
DATA kc<>+1344(SB)/4, $0x3f3504f3
DATA kc<>+1348(SB)/4, $0x3f3504f3
DATA kc<>+1352(SB)/4, $0x3f3504f3
DATA kc<>+1356(SB)/4, $0x3f3504f3
DATA kc<>+1360(SB)/4, $0x3f3504f3
DATA kc<>+1364(SB)/4, $0x3f3504f3
DATA kc<>+1368(SB)/4, $0x3f3504f3
DATA kc<>+1372(SB)/4, $0x3f3504f3
DATA kc<>+1376(SB)/4, $0x3f4c422a
DATA kc<>+1380(SB)/4, $0x3f4c422a
DATA kc<>+1384(SB)/4, $0x3f4c422a
DATA kc<>+1388(SB)/4, $0x3f4c422a
DATA kc<>+1392(SB)/4, $0x3f4c422a
DATA kc<>+1396(SB)/4, $0x3f4c422a
DATA kc<>+1400(SB)/4, $0x3f4c422a
DATA kc<>+1404(SB)/4, $0x3f4c422a
DATA kc<>+1408(SB)/4, $0x3d372713
DATA kc<>+1412(SB)/4, $0x3d372713
DATA kc<>+1416(SB)/4, $0x3d372713
DATA kc<>+1420(SB)/4, $0x3d372713
DATA kc<>+1424(SB)/4, $0x3d372713
DATA kc<>+1428(SB)/4, $0x3d372713
DATA kc<>+1432(SB)/4, $0x3d372713
DATA kc<>+1436(SB)/4, $0x3d372713
DATA kc<>+1440(SB)/4, $0x3f000000
DATA kc<>+1444(SB)/4, $0x3f000000
DATA kc<>+1448(SB)/4, $0x3f000000
DATA kc<>+1452(SB)/4, $0x3f000000
DATA kc<>+1456(SB)/4, $0x3f000000
DATA kc<>+1460(SB)/4, $0x3f000000
DATA kc<>+1464(SB)/4, $0x3f000000
DATA kc<>+1468(SB)/4, $0x3f000000
DATA kc<>+1472(SB)/4, $0x40000000
DATA kc<>+1476(SB)/4, $0x40000000
DATA kc<>+1480(SB)/4, $0x40000000
DATA kc<>+1484(SB)/4, $0x40000000
DATA kc<>+1488(SB)/4, $0x40000000
DATA kc<>+1492(SB)/4, $0x40000000
DATA kc<>+1496(SB)/4, $0x40000000
DATA kc<>+1500(SB)/4, $0x40000000
DATA kc<>+1504(SB)/4, $0x40800000
DATA kc<>+1508(SB)/4, $0x40800000
DATA kc<>+1512(SB)/4, $0x40800000
DATA kc<>+1516(SB)/4, $0x40800000
DATA kc<>+1520(SB)/4, $0x40800000
DATA kc<>+1524(SB)/4, $0x40800000
DATA kc<>+1528(SB)/4, $0x40800000
DATA kc<>+1532(SB)/4, $0x40800000
DATA kc<>+1536(SB)/4, $0x3f200000
DATA kc<>+1540(SB)/4, $0x3f200000
DATA kc<>+1544(SB)/4, $0x3f200000
DATA kc<>+1548(SB)/4, $0x3f200000
DATA kc<>+1552(SB)/4, $0x3f200000
DATA kc<>+1556(SB)/4, $0x3f200000
DATA kc<>+1560(SB)/4, $0x3f200000
DATA kc<>+1564(SB)/4, $0x3f200000
DATA kc<>+1568(SB)/4, $0x41100000
DATA kc<>+1572(SB)/4, $0x41100000
DATA kc<>+1576(SB)/4, $0x41100000
DATA kc<>+1580(SB)/4, $0x41100000
DATA kc<>+1584(SB)/4, $0x41100000
DATA kc<>+1588(SB)/4, $0x41100000
DATA kc<>+1592(SB)/4, $0x41100000
DATA kc<>+1596(SB)/4, $0x41100000
GLOBL kc<>(SB), RODATA|NOPTR, $1600

// EXP8(X, R) sets R to Exp of the 8 lanes of X; X is kept, Y10-Y15 are clobbered.
#define EXP8(X, R) \
	VMULPS kc<>+0(SB), X, Y10; \
	VROUNDPS $0, Y10, Y10; \
	VMULPS kc<>+32(SB), Y10, Y11; \
	VSUBPS Y11, X, Y11; \
	VMULPS kc<>+64(SB), Y10, Y12; \
	VSUBPS Y12, Y11, Y11; \
	VMULPS kc<>+96(SB), Y11, R; \
	VADDPS kc<>+128(SB), R, R; \
	VMULPS Y11, R, R; \
	VADDPS kc<>+160(SB), R, R; \
	VMULPS Y11, R, R; \
	VADDPS kc<>+192(SB), R, R; \
	VMULPS Y11, R, R; \
	VADDPS kc<>+224(SB), R, R; \
	VMULPS Y11, R, R; \
	VADDPS kc<>+256(SB), R, R; \
	VMULPS Y11, Y11, Y12; \
	VMULPS Y12, R, R; \
	VADDPS Y11, R, R; \
	VADDPS kc<>+288(SB), R, R; \
	VCMPPS $0x1e, kc<>+320(SB), Y10, Y13; \
	VANDPS kc<>+288(SB), Y13, Y13; \
	VADDPS kc<>+288(SB), Y13, Y13; \
	VMULPS Y13, R, R; \
	VMINPS kc<>+320(SB), Y10, Y10; \
	VCVTPS2DQ Y10, Y10; \
	VPADDD kc<>+352(SB), Y10, Y10; \
	VPSLLD $23, Y10, Y10; \
	VMULPS Y10, R, R; \
	VCMPPS $0x1e, kc<>+384(SB), X, Y14; \
	VANDPS Y14, R, R; \
	VCMPPS $0x1e, kc<>+416(SB), X, Y15; \
	VBLENDVPS Y15, kc<>+448(SB), R, R; \
	VCMPPS $3, X, X, Y15; \
	VBLENDVPS Y15, X, R, R

// ERF8(X, R) sets R to Erf of X; X is kept; Y1-Y9 and Y10-Y15 are clobbered.
#define ERF8(X, R) \
	VANDPS kc<>+512(SB), X, Y1; \
	VMULPS X, X, Y5; \
	VMOVUPS kc<>+544(SB), Y2; \
	VMULPS Y5, Y2, Y2; \
	VADDPS kc<>+576(SB), Y2, Y2; \
	VMULPS Y5, Y2, Y2; \
	VADDPS kc<>+608(SB), Y2, Y2; \
	VMULPS Y5, Y2, Y2; \
	VADDPS kc<>+640(SB), Y2, Y2; \
	VMULPS Y5, Y2, Y2; \
	VADDPS kc<>+672(SB), Y2, Y2; \
	VMULPS Y5, Y2, Y2; \
	VADDPS kc<>+704(SB), Y2, Y2; \
	VMULPS Y5, Y2, Y2; \
	VADDPS kc<>+736(SB), Y2, Y2; \
	VMULPS Y5, Y2, Y2; \
	VADDPS kc<>+768(SB), Y2, Y2; \
	VMULPS Y2, X, Y2; \
	VMOVUPS kc<>+800(SB), Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS kc<>+832(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS kc<>+864(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS kc<>+896(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS kc<>+928(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS kc<>+960(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS kc<>+992(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS kc<>+1024(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS kc<>+1056(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS kc<>+1088(SB), Y3, Y3; \
	VMULPS Y1, Y3, Y3; \
	VADDPS kc<>+1120(SB), Y3, Y3; \
	EXP8(Y3, Y4); \
	VMOVUPS kc<>+288(SB), Y6; \
	VSUBPS Y4, Y6, Y6; \
	VANDPS kc<>+480(SB), X, Y7; \
	VORPS Y7, Y6, Y6; \
	VCMPPS $0x11, kc<>+288(SB), Y1, Y8; \
	VBLENDVPS Y8, Y2, Y6, Y6; \
	VORPS kc<>+288(SB), Y7, Y7; \
	VCMPPS $0x15, kc<>+1504(SB), Y1, Y9; \
	VBLENDVPS Y9, Y7, Y6, Y6; \
	VCMPPS $3, X, X, Y9; \
	VBLENDVPS Y9, X, Y6, R

// TANH8(X, R) sets R to Tanh of X; X is kept; Y1-Y9 and Y10-Y15 are clobbered.
#define TANH8(X, R) \
	VANDPS kc<>+512(SB), X, Y1; \
	VMULPS X, X, Y5; \
	VMOVUPS kc<>+1152(SB), Y2; \
	VMULPS Y5, Y2, Y2; \
	VADDPS kc<>+1184(SB), Y2, Y2; \
	VMULPS Y5, Y2, Y2; \
	VADDPS kc<>+1216(SB), Y2, Y2; \
	VMULPS Y5, Y2, Y2; \
	VADDPS kc<>+1248(SB), Y2, Y2; \
	VMULPS Y5, Y2, Y2; \
	VADDPS kc<>+1280(SB), Y2, Y2; \
	VMULPS Y5, Y2, Y2; \
	VADDPS kc<>+1312(SB), Y2, Y2; \
	VMULPS Y5, X, Y6; \
	VMULPS Y2, Y6, Y6; \
	VADDPS Y6, X, Y2; \
	VADDPS Y1, Y1, Y3; \
	EXP8(Y3, Y4); \
	VADDPS kc<>+288(SB), Y4, Y4; \
	VMOVUPS kc<>+1472(SB), Y6; \
	VDIVPS Y4, Y6, Y6; \
	VMOVUPS kc<>+288(SB), Y4; \
	VSUBPS Y6, Y4, Y6; \
	VANDPS kc<>+480(SB), X, Y7; \
	VORPS Y7, Y6, Y6; \
	VCMPPS $0x11, kc<>+1536(SB), Y1, Y8; \
	VBLENDVPS Y8, Y2, Y6, Y6; \
	VORPS kc<>+288(SB), Y7, Y7; \
	VCMPPS $0x16, kc<>+1568(SB), Y1, Y9; \
	VBLENDVPS Y9, Y7, Y6, Y6; \
	VCMPPS $3, X, X, Y9; \
	VBLENDVPS Y9, X, Y6, R


// func expAVX2(dst, src *float32, n int)
// dst[i] = Exp(src[i]) for i < n (a multiple of 8).
TEXT ·expAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JEQ expAVX2done
expAVX2loop:
	VMOVUPS (SI), Y0
	EXP8(Y0, Y1)
	VMOVAPS Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE expAVX2loop
expAVX2done:
	VZEROUPPER
	RET


// func erfAVX2(dst, src *float32, n int)
// dst[i] = Erf(src[i]).
TEXT ·erfAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JEQ erfAVX2done
erfAVX2loop:
	VMOVUPS (SI), Y0
	ERF8(Y0, Y1)
	VMOVAPS Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE erfAVX2loop
erfAVX2done:
	VZEROUPPER
	RET


// func tanhAVX2(dst, src *float32, n int)
// dst[i] = Tanh(src[i]).
TEXT ·tanhAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JEQ tanhAVX2done
tanhAVX2loop:
	VMOVUPS (SI), Y0
	TANH8(Y0, Y1)
	VMOVAPS Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE tanhAVX2loop
tanhAVX2done:
	VZEROUPPER
	RET


// func geluAVX2(dst, src *float32, n int)
// dst[i] = (x·0.5)·(1 + Erf(x·(1/√2))), x = src[i]: exact GELU (x reloaded, so dst may be src).
TEXT ·geluAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JEQ geluAVX2done
geluAVX2loop:
	VMOVUPS (SI), Y0
	VMULPS kc<>+1344(SB), Y0, Y0
	ERF8(Y0, Y1)
	VADDPS kc<>+288(SB), Y1, Y1
	VMOVUPS (SI), Y2
	VMULPS kc<>+1440(SB), Y2, Y2
	VMULPS Y1, Y2, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE geluAVX2loop
geluAVX2done:
	VZEROUPPER
	RET

// func geluTanhAVX2(dst, src *float32, n int)
// dst[i] = (x·0.5)·(1 + Tanh((x + x·x·x·0.044715)·√(2/π))): GELU, tanh form.
TEXT ·geluTanhAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JEQ geluTanhAVX2done
geluTanhAVX2loop:
	VMOVUPS (SI), Y0
	VMULPS Y0, Y0, Y9
	VMULPS Y0, Y9, Y9
	VMULPS kc<>+1408(SB), Y9, Y9
	VADDPS Y9, Y0, Y0
	VMULPS kc<>+1376(SB), Y0, Y0
	TANH8(Y0, Y1)
	VADDPS kc<>+288(SB), Y1, Y1
	VMOVUPS (SI), Y2
	VMULPS kc<>+1440(SB), Y2, Y2
	VMULPS Y1, Y2, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE geluTanhAVX2loop
geluTanhAVX2done:
	VZEROUPPER
	RET

// func sigmoidAVX2(dst, src *float32, n int, silu bool)
TEXT ·sigmoidAVX2(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVBQZX silu+24(FP), AX
	SHRQ $3, CX
	JEQ sigdone
sigloop:
	VMOVUPS (SI), Y2
	VXORPS kc<>+480(SB), Y2, Y0
	EXP8(Y0, Y1)
	VADDPS kc<>+288(SB), Y1, Y1
	VMOVUPS kc<>+288(SB), Y3
	VDIVPS Y1, Y3, Y1
	TESTQ AX, AX
	JEQ sigstore
	VMULPS Y1, Y2, Y1
sigstore:
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE sigloop
sigdone:
	VZEROUPPER
	RET

// func expSubSumAVX2(s *float32, n int, m float32, sums *[8]float32)
// s[i] = Exp(s[i] − m) for i < n (a multiple of 8); sums[l] += the lane-l values in order.
TEXT ·expSubSumAVX2(SB), NOSPLIT, $0-32
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS m+16(FP), Y4
	MOVQ sums+24(FP), DX
	VMOVUPS (DX), Y5
	SHRQ $3, CX
	JEQ essdone
essloop:
	VMOVUPS (SI), Y0
	VSUBPS Y4, Y0, Y0
	EXP8(Y0, Y1)
	VMOVUPS Y1, (SI)
	VADDPS Y1, Y5, Y5
	ADDQ $32, SI
	DECQ CX
	JNE essloop
essdone:
	VMOVUPS Y5, (DX)
	VZEROUPPER
	RET

// func sum64AVX2(s *float32, n int, out *[8]float64)
// out[l] += Σ of s[8·j + l] for 8·j < n (n a multiple of 8), each value widened to float64.
TEXT ·sum64AVX2(SB), NOSPLIT, $0-24
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ out+16(FP), DX
	VMOVUPD (DX), Y3
	VMOVUPD 32(DX), Y4
	SHRQ $3, CX
	JEQ sumdone
sumloop:
	VCVTPS2PD (SI), Y1
	VCVTPS2PD 16(SI), Y2
	VADDPD Y1, Y3, Y3
	VADDPD Y2, Y4, Y4
	ADDQ $32, SI
	DECQ CX
	JNE sumloop
sumdone:
	VMOVUPD Y3, (DX)
	VMOVUPD Y4, 32(DX)
	VZEROUPPER
	RET

// func sqDev64AVX2(s *float32, n int, m float64, out *[8]float64)
// out[l] += Σ (s[8·j + l] − m)² in float64, as sum64AVX2.
TEXT ·sqDev64AVX2(SB), NOSPLIT, $0-32
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSD m+16(FP), Y0
	MOVQ out+24(FP), DX
	VMOVUPD (DX), Y3
	VMOVUPD 32(DX), Y4
	SHRQ $3, CX
	JEQ sqdone
sqloop:
	VCVTPS2PD (SI), Y1
	VCVTPS2PD 16(SI), Y2
	VSUBPD Y0, Y1, Y1
	VSUBPD Y0, Y2, Y2
	VMULPD Y1, Y1, Y1
	VMULPD Y2, Y2, Y2
	VADDPD Y1, Y3, Y3
	VADDPD Y2, Y4, Y4
	ADDQ $32, SI
	DECQ CX
	JNE sqloop
sqdone:
	VMOVUPD Y3, (DX)
	VMOVUPD Y4, 32(DX)
	VZEROUPPER
	RET

// func affineAVX2(dst, src *float32, n int, mean, a, b float32, silu bool)
// dst[i] = (src[i] − mean)·a + b, then SiLU when silu, for i < n (a multiple of 8).
TEXT ·affineAVX2(SB), NOSPLIT, $0-37
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS mean+24(FP), Y5
	VBROADCASTSS a+28(FP), Y6
	VBROADCASTSS b+32(FP), Y7
	MOVBQZX silu+36(FP), AX
	SHRQ $3, CX
	JEQ affdone
affloop:
	VMOVUPS (SI), Y2
	VSUBPS Y5, Y2, Y2
	VMULPS Y6, Y2, Y2
	VADDPS Y7, Y2, Y2
	TESTQ AX, AX
	JEQ affstore
	VXORPS kc<>+480(SB), Y2, Y0
	EXP8(Y0, Y1)
	VADDPS kc<>+288(SB), Y1, Y1
	VMOVUPS kc<>+288(SB), Y3
	VDIVPS Y1, Y3, Y1
	VMULPS Y1, Y2, Y2
affstore:
	VMOVUPS Y2, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE affloop
affdone:
	VZEROUPPER
	RET

// func addAVX2(dst, src *float32, n int)
// dst[i] += src[i] for i < n (a multiple of 8).
TEXT ·addAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JEQ adddone
addloop:
	VMOVUPS (DI), Y0
	VADDPS (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE addloop
adddone:
	VZEROUPPER
	RET

// func mulAVX2(dst, a, b *float32, n int)
// dst[i] = a[i]·b[i] for i < n (a multiple of 8).
TEXT ·mulAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JEQ muldone
mulloop:
	VMOVUPS (SI), Y0
	VMULPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNE mulloop
muldone:
	VZEROUPPER
	RET

// func addScalarAVX2(dst *float32, n int, b float32)
// dst[i] += b for i < n (a multiple of 8).
TEXT ·addScalarAVX2(SB), NOSPLIT, $0-20
	MOVQ dst+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS b+16(FP), Y1
	SHRQ $3, CX
	JEQ addsdone
addsloop:
	VADDPS (DI), Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	DECQ CX
	JNE addsloop
addsdone:
	VZEROUPPER
	RET

// func binaryAVX2(dst, a, b *float32, n int, op int, scalarB bool)
// dst[i] = a[i] op b[i] (or op b[0] when scalarB) for i < n (a multiple of 8); op 0-3 is
// add, subtract, multiply, divide, as BinaryOp.
TEXT ·binaryAVX2(SB), NOSPLIT, $0-41
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ op+32(FP), AX
	MOVBQZX scalarB+40(FP), BX
	SHRQ $3, CX
	JEQ bindone
	VBROADCASTSS (DX), Y1
	SHLQ $1, AX
	ORQ BX, AX
	CMPQ AX, $0
	JEQ binADD0
	CMPQ AX, $1
	JEQ binADD1
	CMPQ AX, $2
	JEQ binSUB0
	CMPQ AX, $3
	JEQ binSUB1
	CMPQ AX, $4
	JEQ binMUL0
	CMPQ AX, $5
	JEQ binMUL1
	CMPQ AX, $6
	JEQ binDIV0
	CMPQ AX, $7
	JEQ binDIV1
	JMP bindone
binADD0:
	VMOVUPS (SI), Y0
	VADDPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNE binADD0
	JMP bindone
binADD1:
	VMOVUPS (SI), Y0
	VADDPS Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE binADD1
	JMP bindone
binSUB0:
	VMOVUPS (SI), Y0
	VSUBPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNE binSUB0
	JMP bindone
binSUB1:
	VMOVUPS (SI), Y0
	VSUBPS Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE binSUB1
	JMP bindone
binMUL0:
	VMOVUPS (SI), Y0
	VMULPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNE binMUL0
	JMP bindone
binMUL1:
	VMOVUPS (SI), Y0
	VMULPS Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE binMUL1
	JMP bindone
binDIV0:
	VMOVUPS (SI), Y0
	VDIVPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNE binDIV0
	JMP bindone
binDIV1:
	VMOVUPS (SI), Y0
	VDIVPS Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE binDIV1
	JMP bindone
bindone:
	VZEROUPPER
	RET
