// big_program.cl — a large program: its build is the expensive register (a cold PoCL build
// takes well over 50 ms) that runs elsewhere on the chip should hide. The kernel itself is
// cheap: out[i] = the sum of STAGES small polynomial stages applied to in[i].
// Signature: IN in (float[n]), OUT out (float[n]), SCALAR n (ulong). Launch: 1 dimension.
// Build options: -DSTAGES=<k> (1..256, default 64) sets its size: the build time grows with k.
#ifndef STAGES
#define STAGES 64
#endif
// Each stage is a distinct function so the compiler cannot share work between them.
#define STAGE(k)                                                        \
  float stage_##k(float x) {                                            \
    float y = x * (1.0f + (float)(k) / 1024.0f);                        \
    for (int j = 0; j < ((k) % 5) + 2; ++j) {                            \
      y = y * 0.5f + sin(y + (float)(k)) * cos(x - (float)j) + (float)(k % 3); \
    }                                                                   \
    return y;                                                           \
  }

#if STAGES > 0
STAGE(0)
#endif
#if STAGES > 1
STAGE(1)
#endif
#if STAGES > 2
STAGE(2)
#endif
#if STAGES > 3
STAGE(3)
#endif
#if STAGES > 4
STAGE(4)
#endif
#if STAGES > 5
STAGE(5)
#endif
#if STAGES > 6
STAGE(6)
#endif
#if STAGES > 7
STAGE(7)
#endif
#if STAGES > 8
STAGE(8)
#endif
#if STAGES > 9
STAGE(9)
#endif
#if STAGES > 10
STAGE(10)
#endif
#if STAGES > 11
STAGE(11)
#endif
#if STAGES > 12
STAGE(12)
#endif
#if STAGES > 13
STAGE(13)
#endif
#if STAGES > 14
STAGE(14)
#endif
#if STAGES > 15
STAGE(15)
#endif
#if STAGES > 16
STAGE(16)
#endif
#if STAGES > 17
STAGE(17)
#endif
#if STAGES > 18
STAGE(18)
#endif
#if STAGES > 19
STAGE(19)
#endif
#if STAGES > 20
STAGE(20)
#endif
#if STAGES > 21
STAGE(21)
#endif
#if STAGES > 22
STAGE(22)
#endif
#if STAGES > 23
STAGE(23)
#endif
#if STAGES > 24
STAGE(24)
#endif
#if STAGES > 25
STAGE(25)
#endif
#if STAGES > 26
STAGE(26)
#endif
#if STAGES > 27
STAGE(27)
#endif
#if STAGES > 28
STAGE(28)
#endif
#if STAGES > 29
STAGE(29)
#endif
#if STAGES > 30
STAGE(30)
#endif
#if STAGES > 31
STAGE(31)
#endif
#if STAGES > 32
STAGE(32)
#endif
#if STAGES > 33
STAGE(33)
#endif
#if STAGES > 34
STAGE(34)
#endif
#if STAGES > 35
STAGE(35)
#endif
#if STAGES > 36
STAGE(36)
#endif
#if STAGES > 37
STAGE(37)
#endif
#if STAGES > 38
STAGE(38)
#endif
#if STAGES > 39
STAGE(39)
#endif
#if STAGES > 40
STAGE(40)
#endif
#if STAGES > 41
STAGE(41)
#endif
#if STAGES > 42
STAGE(42)
#endif
#if STAGES > 43
STAGE(43)
#endif
#if STAGES > 44
STAGE(44)
#endif
#if STAGES > 45
STAGE(45)
#endif
#if STAGES > 46
STAGE(46)
#endif
#if STAGES > 47
STAGE(47)
#endif
#if STAGES > 48
STAGE(48)
#endif
#if STAGES > 49
STAGE(49)
#endif
#if STAGES > 50
STAGE(50)
#endif
#if STAGES > 51
STAGE(51)
#endif
#if STAGES > 52
STAGE(52)
#endif
#if STAGES > 53
STAGE(53)
#endif
#if STAGES > 54
STAGE(54)
#endif
#if STAGES > 55
STAGE(55)
#endif
#if STAGES > 56
STAGE(56)
#endif
#if STAGES > 57
STAGE(57)
#endif
#if STAGES > 58
STAGE(58)
#endif
#if STAGES > 59
STAGE(59)
#endif
#if STAGES > 60
STAGE(60)
#endif
#if STAGES > 61
STAGE(61)
#endif
#if STAGES > 62
STAGE(62)
#endif
#if STAGES > 63
STAGE(63)
#endif
#if STAGES > 64
STAGE(64)
#endif
#if STAGES > 65
STAGE(65)
#endif
#if STAGES > 66
STAGE(66)
#endif
#if STAGES > 67
STAGE(67)
#endif
#if STAGES > 68
STAGE(68)
#endif
#if STAGES > 69
STAGE(69)
#endif
#if STAGES > 70
STAGE(70)
#endif
#if STAGES > 71
STAGE(71)
#endif
#if STAGES > 72
STAGE(72)
#endif
#if STAGES > 73
STAGE(73)
#endif
#if STAGES > 74
STAGE(74)
#endif
#if STAGES > 75
STAGE(75)
#endif
#if STAGES > 76
STAGE(76)
#endif
#if STAGES > 77
STAGE(77)
#endif
#if STAGES > 78
STAGE(78)
#endif
#if STAGES > 79
STAGE(79)
#endif
#if STAGES > 80
STAGE(80)
#endif
#if STAGES > 81
STAGE(81)
#endif
#if STAGES > 82
STAGE(82)
#endif
#if STAGES > 83
STAGE(83)
#endif
#if STAGES > 84
STAGE(84)
#endif
#if STAGES > 85
STAGE(85)
#endif
#if STAGES > 86
STAGE(86)
#endif
#if STAGES > 87
STAGE(87)
#endif
#if STAGES > 88
STAGE(88)
#endif
#if STAGES > 89
STAGE(89)
#endif
#if STAGES > 90
STAGE(90)
#endif
#if STAGES > 91
STAGE(91)
#endif
#if STAGES > 92
STAGE(92)
#endif
#if STAGES > 93
STAGE(93)
#endif
#if STAGES > 94
STAGE(94)
#endif
#if STAGES > 95
STAGE(95)
#endif
#if STAGES > 96
STAGE(96)
#endif
#if STAGES > 97
STAGE(97)
#endif
#if STAGES > 98
STAGE(98)
#endif
#if STAGES > 99
STAGE(99)
#endif
#if STAGES > 100
STAGE(100)
#endif
#if STAGES > 101
STAGE(101)
#endif
#if STAGES > 102
STAGE(102)
#endif
#if STAGES > 103
STAGE(103)
#endif
#if STAGES > 104
STAGE(104)
#endif
#if STAGES > 105
STAGE(105)
#endif
#if STAGES > 106
STAGE(106)
#endif
#if STAGES > 107
STAGE(107)
#endif
#if STAGES > 108
STAGE(108)
#endif
#if STAGES > 109
STAGE(109)
#endif
#if STAGES > 110
STAGE(110)
#endif
#if STAGES > 111
STAGE(111)
#endif
#if STAGES > 112
STAGE(112)
#endif
#if STAGES > 113
STAGE(113)
#endif
#if STAGES > 114
STAGE(114)
#endif
#if STAGES > 115
STAGE(115)
#endif
#if STAGES > 116
STAGE(116)
#endif
#if STAGES > 117
STAGE(117)
#endif
#if STAGES > 118
STAGE(118)
#endif
#if STAGES > 119
STAGE(119)
#endif
#if STAGES > 120
STAGE(120)
#endif
#if STAGES > 121
STAGE(121)
#endif
#if STAGES > 122
STAGE(122)
#endif
#if STAGES > 123
STAGE(123)
#endif
#if STAGES > 124
STAGE(124)
#endif
#if STAGES > 125
STAGE(125)
#endif
#if STAGES > 126
STAGE(126)
#endif
#if STAGES > 127
STAGE(127)
#endif
#if STAGES > 128
STAGE(128)
#endif
#if STAGES > 129
STAGE(129)
#endif
#if STAGES > 130
STAGE(130)
#endif
#if STAGES > 131
STAGE(131)
#endif
#if STAGES > 132
STAGE(132)
#endif
#if STAGES > 133
STAGE(133)
#endif
#if STAGES > 134
STAGE(134)
#endif
#if STAGES > 135
STAGE(135)
#endif
#if STAGES > 136
STAGE(136)
#endif
#if STAGES > 137
STAGE(137)
#endif
#if STAGES > 138
STAGE(138)
#endif
#if STAGES > 139
STAGE(139)
#endif
#if STAGES > 140
STAGE(140)
#endif
#if STAGES > 141
STAGE(141)
#endif
#if STAGES > 142
STAGE(142)
#endif
#if STAGES > 143
STAGE(143)
#endif
#if STAGES > 144
STAGE(144)
#endif
#if STAGES > 145
STAGE(145)
#endif
#if STAGES > 146
STAGE(146)
#endif
#if STAGES > 147
STAGE(147)
#endif
#if STAGES > 148
STAGE(148)
#endif
#if STAGES > 149
STAGE(149)
#endif
#if STAGES > 150
STAGE(150)
#endif
#if STAGES > 151
STAGE(151)
#endif
#if STAGES > 152
STAGE(152)
#endif
#if STAGES > 153
STAGE(153)
#endif
#if STAGES > 154
STAGE(154)
#endif
#if STAGES > 155
STAGE(155)
#endif
#if STAGES > 156
STAGE(156)
#endif
#if STAGES > 157
STAGE(157)
#endif
#if STAGES > 158
STAGE(158)
#endif
#if STAGES > 159
STAGE(159)
#endif
#if STAGES > 160
STAGE(160)
#endif
#if STAGES > 161
STAGE(161)
#endif
#if STAGES > 162
STAGE(162)
#endif
#if STAGES > 163
STAGE(163)
#endif
#if STAGES > 164
STAGE(164)
#endif
#if STAGES > 165
STAGE(165)
#endif
#if STAGES > 166
STAGE(166)
#endif
#if STAGES > 167
STAGE(167)
#endif
#if STAGES > 168
STAGE(168)
#endif
#if STAGES > 169
STAGE(169)
#endif
#if STAGES > 170
STAGE(170)
#endif
#if STAGES > 171
STAGE(171)
#endif
#if STAGES > 172
STAGE(172)
#endif
#if STAGES > 173
STAGE(173)
#endif
#if STAGES > 174
STAGE(174)
#endif
#if STAGES > 175
STAGE(175)
#endif
#if STAGES > 176
STAGE(176)
#endif
#if STAGES > 177
STAGE(177)
#endif
#if STAGES > 178
STAGE(178)
#endif
#if STAGES > 179
STAGE(179)
#endif
#if STAGES > 180
STAGE(180)
#endif
#if STAGES > 181
STAGE(181)
#endif
#if STAGES > 182
STAGE(182)
#endif
#if STAGES > 183
STAGE(183)
#endif
#if STAGES > 184
STAGE(184)
#endif
#if STAGES > 185
STAGE(185)
#endif
#if STAGES > 186
STAGE(186)
#endif
#if STAGES > 187
STAGE(187)
#endif
#if STAGES > 188
STAGE(188)
#endif
#if STAGES > 189
STAGE(189)
#endif
#if STAGES > 190
STAGE(190)
#endif
#if STAGES > 191
STAGE(191)
#endif
#if STAGES > 192
STAGE(192)
#endif
#if STAGES > 193
STAGE(193)
#endif
#if STAGES > 194
STAGE(194)
#endif
#if STAGES > 195
STAGE(195)
#endif
#if STAGES > 196
STAGE(196)
#endif
#if STAGES > 197
STAGE(197)
#endif
#if STAGES > 198
STAGE(198)
#endif
#if STAGES > 199
STAGE(199)
#endif
#if STAGES > 200
STAGE(200)
#endif
#if STAGES > 201
STAGE(201)
#endif
#if STAGES > 202
STAGE(202)
#endif
#if STAGES > 203
STAGE(203)
#endif
#if STAGES > 204
STAGE(204)
#endif
#if STAGES > 205
STAGE(205)
#endif
#if STAGES > 206
STAGE(206)
#endif
#if STAGES > 207
STAGE(207)
#endif
#if STAGES > 208
STAGE(208)
#endif
#if STAGES > 209
STAGE(209)
#endif
#if STAGES > 210
STAGE(210)
#endif
#if STAGES > 211
STAGE(211)
#endif
#if STAGES > 212
STAGE(212)
#endif
#if STAGES > 213
STAGE(213)
#endif
#if STAGES > 214
STAGE(214)
#endif
#if STAGES > 215
STAGE(215)
#endif
#if STAGES > 216
STAGE(216)
#endif
#if STAGES > 217
STAGE(217)
#endif
#if STAGES > 218
STAGE(218)
#endif
#if STAGES > 219
STAGE(219)
#endif
#if STAGES > 220
STAGE(220)
#endif
#if STAGES > 221
STAGE(221)
#endif
#if STAGES > 222
STAGE(222)
#endif
#if STAGES > 223
STAGE(223)
#endif
#if STAGES > 224
STAGE(224)
#endif
#if STAGES > 225
STAGE(225)
#endif
#if STAGES > 226
STAGE(226)
#endif
#if STAGES > 227
STAGE(227)
#endif
#if STAGES > 228
STAGE(228)
#endif
#if STAGES > 229
STAGE(229)
#endif
#if STAGES > 230
STAGE(230)
#endif
#if STAGES > 231
STAGE(231)
#endif
#if STAGES > 232
STAGE(232)
#endif
#if STAGES > 233
STAGE(233)
#endif
#if STAGES > 234
STAGE(234)
#endif
#if STAGES > 235
STAGE(235)
#endif
#if STAGES > 236
STAGE(236)
#endif
#if STAGES > 237
STAGE(237)
#endif
#if STAGES > 238
STAGE(238)
#endif
#if STAGES > 239
STAGE(239)
#endif
#if STAGES > 240
STAGE(240)
#endif
#if STAGES > 241
STAGE(241)
#endif
#if STAGES > 242
STAGE(242)
#endif
#if STAGES > 243
STAGE(243)
#endif
#if STAGES > 244
STAGE(244)
#endif
#if STAGES > 245
STAGE(245)
#endif
#if STAGES > 246
STAGE(246)
#endif
#if STAGES > 247
STAGE(247)
#endif
#if STAGES > 248
STAGE(248)
#endif
#if STAGES > 249
STAGE(249)
#endif
#if STAGES > 250
STAGE(250)
#endif
#if STAGES > 251
STAGE(251)
#endif
#if STAGES > 252
STAGE(252)
#endif
#if STAGES > 253
STAGE(253)
#endif
#if STAGES > 254
STAGE(254)
#endif
#if STAGES > 255
STAGE(255)
#endif

__kernel void lw_kernel_main(__global const float *in, __global float *out, ulong n) {
  size_t i = get_global_id(0);
  if (i >= n) return;
  float x = in[i];
  float acc = 0.0f;
#if STAGES > 0
  acc += stage_0(x);
#endif
#if STAGES > 1
  acc += stage_1(x);
#endif
#if STAGES > 2
  acc += stage_2(x);
#endif
#if STAGES > 3
  acc += stage_3(x);
#endif
#if STAGES > 4
  acc += stage_4(x);
#endif
#if STAGES > 5
  acc += stage_5(x);
#endif
#if STAGES > 6
  acc += stage_6(x);
#endif
#if STAGES > 7
  acc += stage_7(x);
#endif
#if STAGES > 8
  acc += stage_8(x);
#endif
#if STAGES > 9
  acc += stage_9(x);
#endif
#if STAGES > 10
  acc += stage_10(x);
#endif
#if STAGES > 11
  acc += stage_11(x);
#endif
#if STAGES > 12
  acc += stage_12(x);
#endif
#if STAGES > 13
  acc += stage_13(x);
#endif
#if STAGES > 14
  acc += stage_14(x);
#endif
#if STAGES > 15
  acc += stage_15(x);
#endif
#if STAGES > 16
  acc += stage_16(x);
#endif
#if STAGES > 17
  acc += stage_17(x);
#endif
#if STAGES > 18
  acc += stage_18(x);
#endif
#if STAGES > 19
  acc += stage_19(x);
#endif
#if STAGES > 20
  acc += stage_20(x);
#endif
#if STAGES > 21
  acc += stage_21(x);
#endif
#if STAGES > 22
  acc += stage_22(x);
#endif
#if STAGES > 23
  acc += stage_23(x);
#endif
#if STAGES > 24
  acc += stage_24(x);
#endif
#if STAGES > 25
  acc += stage_25(x);
#endif
#if STAGES > 26
  acc += stage_26(x);
#endif
#if STAGES > 27
  acc += stage_27(x);
#endif
#if STAGES > 28
  acc += stage_28(x);
#endif
#if STAGES > 29
  acc += stage_29(x);
#endif
#if STAGES > 30
  acc += stage_30(x);
#endif
#if STAGES > 31
  acc += stage_31(x);
#endif
#if STAGES > 32
  acc += stage_32(x);
#endif
#if STAGES > 33
  acc += stage_33(x);
#endif
#if STAGES > 34
  acc += stage_34(x);
#endif
#if STAGES > 35
  acc += stage_35(x);
#endif
#if STAGES > 36
  acc += stage_36(x);
#endif
#if STAGES > 37
  acc += stage_37(x);
#endif
#if STAGES > 38
  acc += stage_38(x);
#endif
#if STAGES > 39
  acc += stage_39(x);
#endif
#if STAGES > 40
  acc += stage_40(x);
#endif
#if STAGES > 41
  acc += stage_41(x);
#endif
#if STAGES > 42
  acc += stage_42(x);
#endif
#if STAGES > 43
  acc += stage_43(x);
#endif
#if STAGES > 44
  acc += stage_44(x);
#endif
#if STAGES > 45
  acc += stage_45(x);
#endif
#if STAGES > 46
  acc += stage_46(x);
#endif
#if STAGES > 47
  acc += stage_47(x);
#endif
#if STAGES > 48
  acc += stage_48(x);
#endif
#if STAGES > 49
  acc += stage_49(x);
#endif
#if STAGES > 50
  acc += stage_50(x);
#endif
#if STAGES > 51
  acc += stage_51(x);
#endif
#if STAGES > 52
  acc += stage_52(x);
#endif
#if STAGES > 53
  acc += stage_53(x);
#endif
#if STAGES > 54
  acc += stage_54(x);
#endif
#if STAGES > 55
  acc += stage_55(x);
#endif
#if STAGES > 56
  acc += stage_56(x);
#endif
#if STAGES > 57
  acc += stage_57(x);
#endif
#if STAGES > 58
  acc += stage_58(x);
#endif
#if STAGES > 59
  acc += stage_59(x);
#endif
#if STAGES > 60
  acc += stage_60(x);
#endif
#if STAGES > 61
  acc += stage_61(x);
#endif
#if STAGES > 62
  acc += stage_62(x);
#endif
#if STAGES > 63
  acc += stage_63(x);
#endif
#if STAGES > 64
  acc += stage_64(x);
#endif
#if STAGES > 65
  acc += stage_65(x);
#endif
#if STAGES > 66
  acc += stage_66(x);
#endif
#if STAGES > 67
  acc += stage_67(x);
#endif
#if STAGES > 68
  acc += stage_68(x);
#endif
#if STAGES > 69
  acc += stage_69(x);
#endif
#if STAGES > 70
  acc += stage_70(x);
#endif
#if STAGES > 71
  acc += stage_71(x);
#endif
#if STAGES > 72
  acc += stage_72(x);
#endif
#if STAGES > 73
  acc += stage_73(x);
#endif
#if STAGES > 74
  acc += stage_74(x);
#endif
#if STAGES > 75
  acc += stage_75(x);
#endif
#if STAGES > 76
  acc += stage_76(x);
#endif
#if STAGES > 77
  acc += stage_77(x);
#endif
#if STAGES > 78
  acc += stage_78(x);
#endif
#if STAGES > 79
  acc += stage_79(x);
#endif
#if STAGES > 80
  acc += stage_80(x);
#endif
#if STAGES > 81
  acc += stage_81(x);
#endif
#if STAGES > 82
  acc += stage_82(x);
#endif
#if STAGES > 83
  acc += stage_83(x);
#endif
#if STAGES > 84
  acc += stage_84(x);
#endif
#if STAGES > 85
  acc += stage_85(x);
#endif
#if STAGES > 86
  acc += stage_86(x);
#endif
#if STAGES > 87
  acc += stage_87(x);
#endif
#if STAGES > 88
  acc += stage_88(x);
#endif
#if STAGES > 89
  acc += stage_89(x);
#endif
#if STAGES > 90
  acc += stage_90(x);
#endif
#if STAGES > 91
  acc += stage_91(x);
#endif
#if STAGES > 92
  acc += stage_92(x);
#endif
#if STAGES > 93
  acc += stage_93(x);
#endif
#if STAGES > 94
  acc += stage_94(x);
#endif
#if STAGES > 95
  acc += stage_95(x);
#endif
#if STAGES > 96
  acc += stage_96(x);
#endif
#if STAGES > 97
  acc += stage_97(x);
#endif
#if STAGES > 98
  acc += stage_98(x);
#endif
#if STAGES > 99
  acc += stage_99(x);
#endif
#if STAGES > 100
  acc += stage_100(x);
#endif
#if STAGES > 101
  acc += stage_101(x);
#endif
#if STAGES > 102
  acc += stage_102(x);
#endif
#if STAGES > 103
  acc += stage_103(x);
#endif
#if STAGES > 104
  acc += stage_104(x);
#endif
#if STAGES > 105
  acc += stage_105(x);
#endif
#if STAGES > 106
  acc += stage_106(x);
#endif
#if STAGES > 107
  acc += stage_107(x);
#endif
#if STAGES > 108
  acc += stage_108(x);
#endif
#if STAGES > 109
  acc += stage_109(x);
#endif
#if STAGES > 110
  acc += stage_110(x);
#endif
#if STAGES > 111
  acc += stage_111(x);
#endif
#if STAGES > 112
  acc += stage_112(x);
#endif
#if STAGES > 113
  acc += stage_113(x);
#endif
#if STAGES > 114
  acc += stage_114(x);
#endif
#if STAGES > 115
  acc += stage_115(x);
#endif
#if STAGES > 116
  acc += stage_116(x);
#endif
#if STAGES > 117
  acc += stage_117(x);
#endif
#if STAGES > 118
  acc += stage_118(x);
#endif
#if STAGES > 119
  acc += stage_119(x);
#endif
#if STAGES > 120
  acc += stage_120(x);
#endif
#if STAGES > 121
  acc += stage_121(x);
#endif
#if STAGES > 122
  acc += stage_122(x);
#endif
#if STAGES > 123
  acc += stage_123(x);
#endif
#if STAGES > 124
  acc += stage_124(x);
#endif
#if STAGES > 125
  acc += stage_125(x);
#endif
#if STAGES > 126
  acc += stage_126(x);
#endif
#if STAGES > 127
  acc += stage_127(x);
#endif
#if STAGES > 128
  acc += stage_128(x);
#endif
#if STAGES > 129
  acc += stage_129(x);
#endif
#if STAGES > 130
  acc += stage_130(x);
#endif
#if STAGES > 131
  acc += stage_131(x);
#endif
#if STAGES > 132
  acc += stage_132(x);
#endif
#if STAGES > 133
  acc += stage_133(x);
#endif
#if STAGES > 134
  acc += stage_134(x);
#endif
#if STAGES > 135
  acc += stage_135(x);
#endif
#if STAGES > 136
  acc += stage_136(x);
#endif
#if STAGES > 137
  acc += stage_137(x);
#endif
#if STAGES > 138
  acc += stage_138(x);
#endif
#if STAGES > 139
  acc += stage_139(x);
#endif
#if STAGES > 140
  acc += stage_140(x);
#endif
#if STAGES > 141
  acc += stage_141(x);
#endif
#if STAGES > 142
  acc += stage_142(x);
#endif
#if STAGES > 143
  acc += stage_143(x);
#endif
#if STAGES > 144
  acc += stage_144(x);
#endif
#if STAGES > 145
  acc += stage_145(x);
#endif
#if STAGES > 146
  acc += stage_146(x);
#endif
#if STAGES > 147
  acc += stage_147(x);
#endif
#if STAGES > 148
  acc += stage_148(x);
#endif
#if STAGES > 149
  acc += stage_149(x);
#endif
#if STAGES > 150
  acc += stage_150(x);
#endif
#if STAGES > 151
  acc += stage_151(x);
#endif
#if STAGES > 152
  acc += stage_152(x);
#endif
#if STAGES > 153
  acc += stage_153(x);
#endif
#if STAGES > 154
  acc += stage_154(x);
#endif
#if STAGES > 155
  acc += stage_155(x);
#endif
#if STAGES > 156
  acc += stage_156(x);
#endif
#if STAGES > 157
  acc += stage_157(x);
#endif
#if STAGES > 158
  acc += stage_158(x);
#endif
#if STAGES > 159
  acc += stage_159(x);
#endif
#if STAGES > 160
  acc += stage_160(x);
#endif
#if STAGES > 161
  acc += stage_161(x);
#endif
#if STAGES > 162
  acc += stage_162(x);
#endif
#if STAGES > 163
  acc += stage_163(x);
#endif
#if STAGES > 164
  acc += stage_164(x);
#endif
#if STAGES > 165
  acc += stage_165(x);
#endif
#if STAGES > 166
  acc += stage_166(x);
#endif
#if STAGES > 167
  acc += stage_167(x);
#endif
#if STAGES > 168
  acc += stage_168(x);
#endif
#if STAGES > 169
  acc += stage_169(x);
#endif
#if STAGES > 170
  acc += stage_170(x);
#endif
#if STAGES > 171
  acc += stage_171(x);
#endif
#if STAGES > 172
  acc += stage_172(x);
#endif
#if STAGES > 173
  acc += stage_173(x);
#endif
#if STAGES > 174
  acc += stage_174(x);
#endif
#if STAGES > 175
  acc += stage_175(x);
#endif
#if STAGES > 176
  acc += stage_176(x);
#endif
#if STAGES > 177
  acc += stage_177(x);
#endif
#if STAGES > 178
  acc += stage_178(x);
#endif
#if STAGES > 179
  acc += stage_179(x);
#endif
#if STAGES > 180
  acc += stage_180(x);
#endif
#if STAGES > 181
  acc += stage_181(x);
#endif
#if STAGES > 182
  acc += stage_182(x);
#endif
#if STAGES > 183
  acc += stage_183(x);
#endif
#if STAGES > 184
  acc += stage_184(x);
#endif
#if STAGES > 185
  acc += stage_185(x);
#endif
#if STAGES > 186
  acc += stage_186(x);
#endif
#if STAGES > 187
  acc += stage_187(x);
#endif
#if STAGES > 188
  acc += stage_188(x);
#endif
#if STAGES > 189
  acc += stage_189(x);
#endif
#if STAGES > 190
  acc += stage_190(x);
#endif
#if STAGES > 191
  acc += stage_191(x);
#endif
#if STAGES > 192
  acc += stage_192(x);
#endif
#if STAGES > 193
  acc += stage_193(x);
#endif
#if STAGES > 194
  acc += stage_194(x);
#endif
#if STAGES > 195
  acc += stage_195(x);
#endif
#if STAGES > 196
  acc += stage_196(x);
#endif
#if STAGES > 197
  acc += stage_197(x);
#endif
#if STAGES > 198
  acc += stage_198(x);
#endif
#if STAGES > 199
  acc += stage_199(x);
#endif
#if STAGES > 200
  acc += stage_200(x);
#endif
#if STAGES > 201
  acc += stage_201(x);
#endif
#if STAGES > 202
  acc += stage_202(x);
#endif
#if STAGES > 203
  acc += stage_203(x);
#endif
#if STAGES > 204
  acc += stage_204(x);
#endif
#if STAGES > 205
  acc += stage_205(x);
#endif
#if STAGES > 206
  acc += stage_206(x);
#endif
#if STAGES > 207
  acc += stage_207(x);
#endif
#if STAGES > 208
  acc += stage_208(x);
#endif
#if STAGES > 209
  acc += stage_209(x);
#endif
#if STAGES > 210
  acc += stage_210(x);
#endif
#if STAGES > 211
  acc += stage_211(x);
#endif
#if STAGES > 212
  acc += stage_212(x);
#endif
#if STAGES > 213
  acc += stage_213(x);
#endif
#if STAGES > 214
  acc += stage_214(x);
#endif
#if STAGES > 215
  acc += stage_215(x);
#endif
#if STAGES > 216
  acc += stage_216(x);
#endif
#if STAGES > 217
  acc += stage_217(x);
#endif
#if STAGES > 218
  acc += stage_218(x);
#endif
#if STAGES > 219
  acc += stage_219(x);
#endif
#if STAGES > 220
  acc += stage_220(x);
#endif
#if STAGES > 221
  acc += stage_221(x);
#endif
#if STAGES > 222
  acc += stage_222(x);
#endif
#if STAGES > 223
  acc += stage_223(x);
#endif
#if STAGES > 224
  acc += stage_224(x);
#endif
#if STAGES > 225
  acc += stage_225(x);
#endif
#if STAGES > 226
  acc += stage_226(x);
#endif
#if STAGES > 227
  acc += stage_227(x);
#endif
#if STAGES > 228
  acc += stage_228(x);
#endif
#if STAGES > 229
  acc += stage_229(x);
#endif
#if STAGES > 230
  acc += stage_230(x);
#endif
#if STAGES > 231
  acc += stage_231(x);
#endif
#if STAGES > 232
  acc += stage_232(x);
#endif
#if STAGES > 233
  acc += stage_233(x);
#endif
#if STAGES > 234
  acc += stage_234(x);
#endif
#if STAGES > 235
  acc += stage_235(x);
#endif
#if STAGES > 236
  acc += stage_236(x);
#endif
#if STAGES > 237
  acc += stage_237(x);
#endif
#if STAGES > 238
  acc += stage_238(x);
#endif
#if STAGES > 239
  acc += stage_239(x);
#endif
#if STAGES > 240
  acc += stage_240(x);
#endif
#if STAGES > 241
  acc += stage_241(x);
#endif
#if STAGES > 242
  acc += stage_242(x);
#endif
#if STAGES > 243
  acc += stage_243(x);
#endif
#if STAGES > 244
  acc += stage_244(x);
#endif
#if STAGES > 245
  acc += stage_245(x);
#endif
#if STAGES > 246
  acc += stage_246(x);
#endif
#if STAGES > 247
  acc += stage_247(x);
#endif
#if STAGES > 248
  acc += stage_248(x);
#endif
#if STAGES > 249
  acc += stage_249(x);
#endif
#if STAGES > 250
  acc += stage_250(x);
#endif
#if STAGES > 251
  acc += stage_251(x);
#endif
#if STAGES > 252
  acc += stage_252(x);
#endif
#if STAGES > 253
  acc += stage_253(x);
#endif
#if STAGES > 254
  acc += stage_254(x);
#endif
#if STAGES > 255
  acc += stage_255(x);
#endif
  out[i] = acc;
}
